/// What the sender asks chat about a notification it is about to push: its member, its thread, and the message whose
/// body the member shows on the lock screen.
struct ChatContextAsk: Sendable, Hashable {
    var user: String
    var thread: String?
    var bodyOf: String?
}

/// What chat says about a member at the moment a notification is pushed (`GetNotificationContext`).
struct ChatContext: Sendable, Hashable {
    /// A live Subscribe stream on any chat replica: the app is open.
    var online = false
    /// Unread messages across open threads: the badge.
    var unreadMessages = 0
    /// The notification's thread is still open to the member.
    var threadOpen = false
    /// The latest message's body, only when asked for (the member shows message text).
    var messageBody: String?
}
