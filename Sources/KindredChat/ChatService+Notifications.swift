import KindredGRPC
import KindredPostgres
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
        return try await self.notificationContexts([try NotificationContextAsk(request, field: "")])[0]
    }

    /// `GetNotificationContexts`: `GetNotificationContext` for a batch of notify's sender, in one round trip to the
    /// database.
    func getNotificationContexts(_ request: Chat.GetNotificationContextsRequest, _ context: ServerContext)
        async throws -> Chat.GetNotificationContextsResponse
    {
        _ = try await self.access.requireService(["notify"], context)
        guard request.requests.count <= Self.maxNotificationContexts else {
            throw ChatError.invalid("requests", "OUT_OF_RANGE", "at most \(Self.maxNotificationContexts)")
        }
        let asks = try request.requests.enumerated().map { index, ask in
            try NotificationContextAsk(ask, field: "requests[\(index)].")
        }
        var response = Chat.GetNotificationContextsResponse()
        response.contexts = try await self.notificationContexts(asks)
        return response
    }

    static let maxNotificationContexts = 256

    /// The contexts of `asks`, in their order, from one pipeline: each member's presence and unread totals once,
    /// each ask's thread as the member sees it and the message asked for.
    private func notificationContexts(_ asks: [NotificationContextAsk]) async throws
        -> [Chat.GetNotificationContextResponse]
    {
        if asks.isEmpty { return [] }
        var statements: [PostgresQuery] = []
        // Where each member's presence (its unread totals follow) and each ask's thread and message are.
        var members: [String: Int] = [:]
        var rows: [(member: Int, thread: Int?, message: Int?)] = []
        for ask in asks {
            let member: Int
            if let known = members[ask.user] {
                member = known
            } else {
                member = statements.count
                members[ask.user] = member
                statements += [self.presence.isOnlineQuery(ask.user), self.threads.unreadTotalsQuery(for: ask.user)]
            }
            var thread: Int?
            var message: Int?
            if let threadID = ask.threadID {
                thread = statements.count
                statements.append(self.threads.findQuery(threadID, for: ask.user))
            }
            if let messageID = ask.messageID {
                message = statements.count
                statements.append(self.messages.byIDsQuery([messageID]))
            }
            rows.append((member, thread, message))
        }
        let results = try await self.database.pipeline(statements)
        return try zip(asks, rows).map { ask, at in
            var response = Chat.GetNotificationContextResponse()
            response.online = try results[at.member].scalar(Bool.self)
            response.unreadMessages = try ThreadStore.unreadTotals(from: results[at.member + 1]).messages
            if let threadID = ask.threadID, let index = at.thread,
                let thread = try results[index].first.map({ try ThreadRecord(row: $0) }),
                VisibilityPolicy.allows(.thread, thread.relation)
            {
                response.threadOpen = true
                // The message's thread is this one, so its pair is the member's and the other's of the thread.
                if let index = at.message,
                    let message = try results[index].first.map({ try Kindred.Chat.V1.ChatMessage(row: $0) }),
                    message.threadId == threadID
                {
                    response.messageBody = message.body
                }
            }
            return response
        }
    }
}

/// One member's notification context asked for, its ids checked.
private struct NotificationContextAsk {
    var user: String
    var threadID: String?
    var messageID: String?

    /// `field`: the request's place in a batch ("requests[2].") or "".
    init(_ request: Chat.GetNotificationContextRequest, field: String) throws {
        self.user = try ChatValidation.id(request.userId, field: field + "user_id")
        self.threadID = request.threadId.isEmpty ? nil : try ChatValidation.id(request.threadId, field: field + "thread_id")
        self.messageID =
            request.messageId.isEmpty ? nil : try ChatValidation.id(request.messageId, field: field + "message_id")
        if self.messageID != nil, self.threadID == nil {
            throw ChatError.invalid(field + "thread_id", "REQUIRED", "the thread of message_id")
        }
    }
}
