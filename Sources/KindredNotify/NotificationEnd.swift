/// How one attempt at a claimed notification ended, as the sender records it (``NotificationStore/record(_:in:)``,
/// one statement for every end that came in meanwhile): finished in a state, or put back for a later attempt; with
/// the devices it reached on this attempt, so that a retry skips them.
struct NotificationEnd: Sendable, Hashable {
    enum Outcome: Sendable, Hashable {
        /// Ended as `sent`, `failed`, `skipped`, `suppressed` or `cancelled` (a cancelled one stays cancelled).
        case finished(String)
        /// Tried again after `after`; `attempt` counts it as a failed attempt (quiet hours do not).
        case retry(after: Duration, attempt: Bool)
    }

    var id: String
    var outcome: Outcome
    /// Devices that got it on this attempt.
    var delivered: [String] = []

    static func finished(_ id: String, as state: String, delivered: [String] = []) -> NotificationEnd {
        NotificationEnd(id: id, outcome: .finished(state), delivered: delivered)
    }

    static func retry(_ id: String, after delay: Duration, attempt: Bool, delivered: [String] = []) -> NotificationEnd {
        NotificationEnd(id: id, outcome: .retry(after: delay, attempt: attempt), delivered: delivered)
    }
}
