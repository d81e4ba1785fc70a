/// How a message joins the queue: several messages of one thread while its notification waits become that one
/// notification (the same id and collapse key, its latest message updated), not a second one. A new notification
/// waits `window` before it is due, so a burst of messages within the window leads to one push.
///
/// A waiting notification takes a message only while no sender holds it and no attempt was made yet (no device has
/// it): otherwise the message would be folded into a push already on its way, or one some device already showed,
/// and never be told. Then a new notification is queued; it has the same collapse key, so the device shows one.
/// Pure: `MessageCollapseTests` walks it.
struct MessageCollapse: Sendable, Hashable {
    /// `KINDRED_NOTIFY_MESSAGE_COLLAPSE_MS`: how long a new message notification waits for more of its thread.
    var window: Duration

    enum Action: Sendable, Hashable {
        /// Update the waiting notification `id`: latest message, one more message.
        case merge(into: String)
        /// Queue a new notification due after `delay`.
        case queue(delay: Duration)
    }

    func action(waiting: WaitingNotification?) -> Action {
        if let waiting, waiting.takesMore { return .merge(into: waiting.id) }
        return .queue(delay: self.window)
    }

    /// The collapse key of a thread's notifications: `apns-collapse-id`, FCM `collapse_key`, Web Push `Topic`
    /// (the thread id's 32 hex digits: Web Push topics allow at most 32 URL-safe characters).
    static func key(thread: String) -> String {
        thread.lowercased().replacingOccurrences(of: "-", with: "")
    }
}
