import KindredPostgres
import KindredProto
import KindredServiceKit

extension NotifyService {
    /// A message (chat's MessageSent): the recipient's notification of the thread, if they want message
    /// notifications and neither blocked the other (a block applied first). A notification of the thread still waiting takes it (``MessageCollapse``); otherwise a new one
    /// is queued, due after the collapse window. Ids only: the body stays in chat until the push (and is read
    /// then only when the recipient shows message text on the lock screen).
    func queueMessage(
        _ message: Kindred.Common.V1.MessageSent, from sender: String, holding held: EventBatchLocks,
        in transaction: PostgresTransaction
    ) async throws {
        let recipient = message.recipientUserId.lowercased()
        let ids = [sender, recipient, message.threadId, message.messageId]
        guard ids.allSatisfy(UUIDv7.isValid), sender != recipient else {
            self.logger.error("MessageSent without valid ids: ignored")
            return
        }
        let preferences = try await self.settings.preferences(of: recipient, in: transaction)
        guard NotificationKind.newMessage.isWanted(by: preferences) else { return }
        if !held.holds(pair: sender, recipient) {
            try await self.blocks.lock(between: sender, and: recipient, in: transaction)
        }
        guard try await !self.blocks.isBlocked(between: sender, and: recipient, in: transaction) else { return }
        let thread = message.threadId.lowercased()
        let messageID = message.messageId.lowercased()
        let key = MessageCollapse.key(thread: thread)
        let waiting = try await self.notifications.waiting(
            .newMessage, to: recipient, collapseKey: key, locking: false, in: transaction)
        if case .merge(let id) = self.collapse.action(waiting: waiting),
            try await self.notifications.merge(message: messageID, into: id, in: transaction)
        {
            return
        }
        try await self.notifications.enqueueMessage(
            id: try UUIDv7.generate(), to: recipient, from: sender, thread: thread, message: messageID,
            collapseKey: key, delay: self.collapse.window, in: transaction)
    }
}
