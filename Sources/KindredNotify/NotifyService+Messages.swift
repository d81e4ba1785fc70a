import KindredPostgres
import KindredProto
import KindredServiceKit

extension NotifyService {
    /// A message (chat's MessageSent): the recipient's notification of the thread, if they want message
    /// notifications and neither blocked the other (a block applied first). A notification of the thread still
    /// waiting takes it (``MessageCollapse``); otherwise a new one is queued, due after the collapse window: one
    /// statement (``NotificationStore/queueMessage(id:to:from:thread:message:collapseKey:delay:wantedByDefault:in:)``)
    /// under the pair's lock. Ids only: the body stays in chat until the push (and is read then only when the
    /// recipient shows message text on the lock screen).
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
        if !held.holds(pair: sender, recipient) {
            try await self.blocks.lock(between: sender, and: recipient, in: transaction)
        }
        let thread = message.threadId.lowercased()
        let queueing = try await self.notifications.queueMessage(
            id: try UUIDv7.generate(), to: recipient, from: sender, thread: thread,
            message: message.messageId.lowercased(), collapseKey: MessageCollapse.key(thread: thread),
            delay: self.collapse.window, wantedByDefault: NotificationPreferences.defaults.newMessage, in: transaction)
        self.logger.debug("message notification", metadata: ["notify.queueing": "\(queueing)"])
    }
}
