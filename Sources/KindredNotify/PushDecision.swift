/// What to do with a due notification once chat has said how the member's chat stands (``ChatContext``). Pure:
/// `PushDecisionTests` walks it.
enum PushDecision: Sendable, Hashable {
    /// The member has the app open: a message needs no push.
    case suppress
    /// The message's thread ended (unmatch, block, deletion) or was never the member's: nothing is to be said.
    case cancel
    /// Push with these facts (the name is filled in afterwards) and this badge.
    case send(NotificationTemplates.Facts, badge: Int?)

    /// `chat` nil: chat could not answer (or is not configured); the push goes out without presence, badge or text,
    /// since a push to an open app is a smaller harm than a message never told.
    static func decide(
        _ queued: QueuedNotification, preferences: NotificationPreferences, chat: ChatContext?
    ) -> PushDecision {
        var facts = NotificationTemplates.Facts(connection: queued.connection, count: queued.itemCount)
        facts.activity = queued.activity
        if queued.kind == .newMessage, let chat {
            if chat.online { return .suppress }
            if !chat.threadOpen { return .cancel }
            if preferences.showMessageText { facts.messageText = chat.messageBody }
        }
        return .send(facts, badge: chat?.unreadMessages)
    }
}
