/// A notification the sender claimed from the queue (table `notifications`): ids only, texts are rendered per
/// device when sent.
struct QueuedNotification: Sendable, Hashable {
    var id: String
    var user: String
    var kind: NotificationKind
    var subject: String?
    var collapseKey: String?
    var connection: Bool
    /// Earlier attempts that some device asked to retry.
    var attempts: Int
    /// new_message: the thread, its latest message, and how many messages the notification stands for.
    var thread: String? = nil
    var latestMessage: String? = nil
    var itemCount = 1
    /// activity: the activity key (nil: none named) and when the broadcast ends (nothing is sent after it).
    var activity: String? = nil
    var expiresUnixMs: Int64? = nil
}
