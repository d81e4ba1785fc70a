import KindredGRPC
import KindredProto
import KindredServiceKit

extension ChatService {
    /// `GetNotificationContext`: what notify needs when it is about to push to a member: presence (a live
    /// Subscribe stream on any replica), the unread total for the badge, whether the thread is still open to the
    /// member, and a message's body only when notify asks for it (the member shows message text on the lock
    /// screen) and it is in that open thread. notify's service token only: bodies reach no other caller this way.
    func getNotificationContext(_ request: Chat.GetNotificationContextRequest, _ context: ServerContext) async throws
        -> Chat.GetNotificationContextResponse
    {
        _ = try await self.access.requireService(["notify"], context)
        let user = try ChatValidation.id(request.userId, field: "user_id")
        let threadID = request.threadId.isEmpty ? nil : try ChatValidation.id(request.threadId, field: "thread_id")
        let messageID = request.messageId.isEmpty ? nil : try ChatValidation.id(request.messageId, field: "message_id")
        if messageID != nil, threadID == nil {
            throw ChatError.invalid("thread_id", "REQUIRED", "the thread of message_id")
        }
        // One round trip: presence, the unread totals, the thread as the member sees it and the message asked for.
        var statements = [self.presence.isOnlineQuery(user), self.threads.unreadTotalsQuery(for: user)]
        if let threadID { statements.append(self.threads.findQuery(threadID, for: user)) }
        if let messageID { statements.append(self.messages.byIDsQuery([messageID])) }
        let results = try await self.database.pipeline(statements)
        var response = Chat.GetNotificationContextResponse()
        response.online = try results[0].scalar(Bool.self)
        response.unreadMessages = try ThreadStore.unreadTotals(from: results[1]).messages
        if let threadID, let thread = try results[2].first.map({ try ThreadRecord(row: $0) }),
            VisibilityPolicy.allows(.thread, thread.relation)
        {
            response.threadOpen = true
            // The message's thread is this one, so its pair is the member's and the other's of the thread.
            if messageID != nil, let message = try results[3].first.map({ try Kindred.Chat.V1.ChatMessage(row: $0) }),
                message.threadId == threadID
            {
                response.messageBody = message.body
            }
        }
        return response
    }
}
