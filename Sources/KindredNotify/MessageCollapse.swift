/// How a message joins the queue: several messages of one thread while its notification waits become that one
/// notification (the same id and collapse key, its latest message updated), not a second one. A new notification
/// waits `window` before it is due, so a burst of messages within the window leads to one push.
///
/// A waiting notification takes a message only while no sender holds it and no attempt was made yet (no device has
/// it): otherwise the message would be folded into a push already on its way, or one some device already showed,
/// and never be told. Then a new notification is queued; it has the same collapse key, so the device shows one.
/// The rule is written in the statement that queues a message
/// (``NotificationStore/queueMessage(id:to:from:thread:message:collapseKey:delay:wantedByDefault:in:)``), which
/// `MessageQueueTests` walks case by case against PostgreSQL.
struct MessageCollapse: Sendable, Hashable {
    /// `KINDRED_NOTIFY_MESSAGE_COLLAPSE_MS`: how long a new message notification waits for more of its thread.
    var window: Duration

    /// The collapse key of a thread's notifications: `apns-collapse-id`, FCM `collapse_key`, Web Push `Topic`
    /// (the thread id's 32 hex digits: Web Push topics allow at most 32 URL-safe characters).
    static func key(thread: String) -> String {
        thread.lowercased().replacingOccurrences(of: "-", with: "")
    }
}
