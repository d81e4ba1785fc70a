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
