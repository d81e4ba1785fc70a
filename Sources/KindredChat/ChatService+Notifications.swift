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
        var response = Chat.GetNotificationContextResponse()
        response.online = try await self.presence.isOnline(user)
        response.unreadMessages = try await self.threads.unreadTotals(for: user, in: self.database).messages
        if let threadID, let thread = try await self.threads.find(threadID, for: user, lock: false, in: self.database),
            VisibilityPolicy.allows(.thread, thread.relation)
        {
            response.threadOpen = true
            if let messageID,
                let message = try await self.messages.byIDs([messageID], between: (thread.userA, thread.userB), in: self.database)
                    .first, message.threadId == threadID
            {
                response.messageBody = message.body
            }
        }
        return response
    }
}
