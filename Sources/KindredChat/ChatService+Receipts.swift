import KindredGRPC
import KindredPostgres
import KindredProto

extension ChatService {
    /// `MarkRead`: moves the caller's read position up to a message of the thread (never back) and sends a read
    /// receipt to the other participant (unless either hides read receipts) and to the caller's other devices.
    func markRead(_ request: Chat.MarkReadRequest, _ context: ServerContext) async throws -> Chat.MarkReadResponse {
        let user = try await self.access.requireUser(context).id
        let threadID = try ChatValidation.id(request.threadId, field: "thread_id")
        let messageID = try ChatValidation.id(request.upToMessageId, field: "up_to_message_id")
        return try await self.database.withTransaction { transaction in
            let thread = try await self.readableThread(threadID, for: user, in: transaction)
            try await self.users.lock([thread.userA, thread.userB], in: transaction)
            guard let message = try await self.messages.find(messageID, in: threadID, in: transaction) else {
                throw ChatError.messageNotFound
            }
            let (_, moved) = try await self.threads.advance(
                .read, of: user, in: threadID, to: message.sequence, in: transaction)
            if moved {
                var receipt = Chat.ReadReceipt()
                receipt.threadId = threadID
                receipt.readerUserId = user
                receipt.upToMessageId = messageID
                receipt.upToSequence = message.sequence
                receipt.readUnixMs = Self.nowMs()
                let event = Self.event(.readReceipt(receipt), at: receipt.readUnixMs)
                let other = thread.other(than: user)
                if !(try await self.users.readReceiptsHidden(between: [user, other], in: transaction)) {
                    try await self.log.append(event, to: other, threadID: threadID, in: transaction)
                }
                try await self.log.append(event, to: user, threadID: threadID, in: transaction)
            }
            var response = Chat.MarkReadResponse()
            response.unreadCount = try await self.threads.unread(in: threadID, for: user, in: transaction)
            return response
        }
    }

    /// `MarkDelivered`: moves the caller's delivery position up to a message (never back) and sends a delivery
    /// receipt to the other participant.
    func markDelivered(_ request: Chat.MarkDeliveredRequest, _ context: ServerContext) async throws
        -> Chat.MarkDeliveredResponse
    {
        let user = try await self.access.requireUser(context).id
        let threadID = try ChatValidation.id(request.threadId, field: "thread_id")
        let messageID = try ChatValidation.id(request.upToMessageId, field: "up_to_message_id")
        try await self.database.withTransaction { transaction in
            let thread = try await self.readableThread(threadID, for: user, in: transaction)
            try await self.users.lock([thread.userA, thread.userB], in: transaction)
            guard let message = try await self.messages.find(messageID, in: threadID, in: transaction) else {
                throw ChatError.messageNotFound
            }
            let (_, moved) = try await self.threads.advance(
                .delivered, of: user, in: threadID, to: message.sequence, in: transaction)
            if moved {
                var receipt = Chat.DeliveryReceipt()
                receipt.threadId = threadID
                receipt.recipientUserId = user
                receipt.upToMessageId = messageID
                receipt.upToSequence = message.sequence
                receipt.deliveredUnixMs = Self.nowMs()
                try await self.log.append(
                    Self.event(.deliveryReceipt(receipt), at: receipt.deliveredUnixMs), to: thread.other(than: user),
                    threadID: threadID, in: transaction)
            }
        }
        return Chat.MarkDeliveredResponse()
    }

    /// `SendTyping`: an ephemeral event to the other participant's live streams (NOTIFY only, never stored),
    /// at most `typingPerMinute` per user and thread (burst 5).
    func sendTyping(_ request: Chat.SendTypingRequest, _ context: ServerContext) async throws -> Chat.SendTypingResponse {
        let user = try await self.access.requireUser(context).id
        let threadID = try ChatValidation.id(request.threadId, field: "thread_id")
        let thread = try await self.readableThread(threadID, for: user, to: .message, in: self.database)
        if let wait = self.typingLimiter.acquire(user + "|" + threadID) {
            throw ChatError.rateLimited("Typing indicators are sent too often", retryAfter: wait)
        }
        var typing = Chat.TypingIndicator()
        typing.threadId = threadID
        typing.userId = user
        try self.log.notifyEphemeral(Self.event(.typing(typing)), to: thread.other(than: user), through: self.database)
        return Chat.SendTypingResponse()
    }

    func getChatSettings(_ request: Chat.GetChatSettingsRequest, _ context: ServerContext) async throws
        -> Chat.ChatSettings
    {
        let user = try await self.access.requireUser(context).id
        var settings = Chat.ChatSettings()
        settings.hideReadReceipts = try await self.users.hidesReadReceipts(user, in: self.database)
        return settings
    }

    func updateChatSettings(_ request: Chat.UpdateChatSettingsRequest, _ context: ServerContext) async throws
        -> Chat.ChatSettings
    {
        let user = try await self.access.requireUser(context).id
        let settings = request.settings ?? Chat.ChatSettings()
        try await self.database.withTransaction { transaction in
            try await self.users.setHideReadReceipts(user, settings.hideReadReceipts, in: transaction)
        }
        return settings
    }
}
