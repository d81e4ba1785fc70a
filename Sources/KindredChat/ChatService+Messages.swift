import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit

extension ChatService {
    /// `SendMessage`: the next sequence of the thread, stored with the server's time and appended to both
    /// participants' event logs in one transaction. Idempotent per (sender, client_message_id) for as long as
    /// the message is stored: the same id with the same thread and body returns the original
    /// (`replayed`), with anything else ALREADY_EXISTS.
    func sendMessage(_ request: Chat.SendMessageRequest, _ context: ServerContext) async throws
        -> Chat.SendMessageResponse
    {
        let user = try await self.access.requireUser(context).id
        let threadID = try ChatValidation.id(request.threadId, field: "thread_id")
        let clientID = try ChatValidation.clientMessageID(request.clientMessageId)
        let body = try ChatValidation.body(request.body)
        let messageID = try UUIDv7.generate()
        // Two round trips: BEGIN, both users locked (in id order, the order every writer takes) and the thread locked
        // with its limits, the sender's count of the last hour, the retry check and the time; then the message, both
        // event logs, the sender's count, the event for notify and COMMIT. The streams' and relays' notifications go
        // after the commit.
        return try await self.database.withTransaction { transaction in
            // Under the sender's row lock: a concurrent retry has committed (and is found) or will wait for us.
            let locked = try await transaction.pipeline([
                ThreadStore.lockParticipantsQuery(of: threadID, for: user),
                ThreadStore.lockForSendQuery(threadID, by: user, clientMessageID: clientID),
            ])
            guard locked[0].count == 2, let send = try ThreadStore.SendState(locked[1]) else {
                throw ChatError.threadNotFound
            }
            if let stored = send.stored { return try Self.replay(stored, threadID: threadID, body: body) }
            let thread = send.thread
            try Self.require(thread, to: .message)
            // Concurrent sends of one user count one after the other (the sender's row is locked).
            guard send.sentLastHour < (send.limit ?? self.configuration.defaultHourlyMessageLimit) else {
                throw ChatError.rateLimited("Hourly message limit reached; try again later", retryAfter: .seconds(60))
            }
            var message = Chat.ChatMessage()
            message.messageId = messageID
            message.threadId = threadID
            message.senderUserId = user
            message.clientMessageId = clientID
            message.body = body
            message.sequence = thread.lastSequence + 1
            message.sentUnixMs = send.now.millisecondsSinceEpoch
            let logs = try EventLogStore.appendQuery(
                Self.event(.message(message), at: message.sentUnixMs), toBoth: thread.userA, thread.userB,
                threadID: threadID)
            let written = try await transaction.commit(after: [
                MessageStore.appendQuery(message),
                logs.query,
                UserStore.countSentQuery(by: user),
                try self.outbox.appendQuery(
                    event: Self.messageSent(message, recipient: thread.other(than: user), community: thread.communityID),
                    in: transaction
                ).query,
            ])
            try logs.announce(written[1], in: transaction)
            var response = Chat.SendMessageResponse()
            response.message = message
            return response
        }
    }

    /// The event notify learns of a message by: ids and the time only, partitioned by the sender (the actor, so an
    /// erasure of the sender's outbox also takes their messages still on the way). The body stays in chat.
    static func messageSent(_ message: Chat.ChatMessage, recipient: String, community: String) -> Kindred.Common.V1.Event {
        var sent = Kindred.Common.V1.MessageSent()
        sent.threadId = message.threadId
        sent.messageId = message.messageId
        sent.recipientUserId = recipient
        sent.sentUnixMs = message.sentUnixMs
        var event = Kindred.Common.V1.Event()
        event.userId = message.senderUserId
        event.communityId = community
        event.occurredUnixMs = message.sentUnixMs
        event.payload = .messageSent(sent)
        return event
    }

    /// The answer to a reused client_message_id.
    static func replay(_ stored: Chat.ChatMessage, threadID: String, body: String) throws -> Chat.SendMessageResponse {
        guard stored.threadId == threadID, stored.body == body else {
            throw ChatError(.clientIDReused, "This client_message_id was already used for another message")
        }
        var response = Chat.SendMessageResponse()
        response.message = stored
        response.replayed = true
        return response
    }

    /// `History`: keyset pages on the sequence, older (newest first) or newer (oldest first), from any point.
    func history(_ request: Chat.HistoryRequest, _ context: ServerContext) async throws -> Chat.HistoryResponse {
        let user = try await self.access.requireUser(context).id
        let threadID = try ChatValidation.id(request.threadId, field: "thread_id")
        let size = try ChatValidation.pageSize(request.pageSize, default: 50)
        let newer = request.direction == .newer
        let scope = "history|\(user)|\(threadID)|\(newer ? "newer" : "older")"
        var from: Int64
        if request.pageToken.isEmpty {
            guard request.fromSequence >= 0 else {
                throw ChatError.invalid("from_sequence", "OUT_OF_RANGE", ">= 0")
            }
            from = request.fromSequence
            if !newer && from == 0 { from = Int64.max }
        } else {
            from = Int64(try PageToken.offset(of: request.pageToken, key: self.pageTokenKey, scope: scope))
        }
        _ = try await self.readableThread(threadID, for: user, in: self.database)
        var page = try await self.messages.page(
            threadID: threadID, newer: newer, from: from, limit: size + 1, in: self.database)
        var response = Chat.HistoryResponse()
        if page.count > size {
            page.removeLast()
            response.nextPageToken = PageToken.encode(
                offset: Int(page[page.count - 1].sequence), key: self.pageTokenKey, scope: scope)
        }
        response.messages = page
        return response
    }

    /// `GetMessages`: admins read messages by id (report evidence).
    func getMessages(_ request: Chat.GetMessagesRequest, _ context: ServerContext) async throws
        -> Chat.GetMessagesResponse
    {
        try await self.access.requireAdmin(context)
        guard (1...50).contains(request.messageIds.count) else {
            throw ChatError.invalid("message_ids", "OUT_OF_RANGE", "1..50 ids")
        }
        let ids = try request.messageIds.map { try ChatValidation.id($0, field: "message_ids") }
        var pair: (String, String)?
        switch request.betweenUserIds.count {
        case 0: pair = nil
        case 2:
            let users = try request.betweenUserIds.map { try ChatValidation.id($0, field: "between_user_ids") }
            pair = (users[0], users[1])
        default: throw ChatError.invalid("between_user_ids", "OUT_OF_RANGE", "none or exactly two user ids")
        }
        let found = Dictionary(
            try await self.messages.byIDs(ids, between: pair, in: self.database).map { ($0.messageId, $0) },
            uniquingKeysWith: { a, _ in a })
        var response = Chat.GetMessagesResponse()
        response.messages = ids.compactMap { found[$0] }
        return response
    }
}
