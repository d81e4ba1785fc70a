/// Likes received are told as a digest ("3 people liked you"), never naming who: the likes gather in one waiting
/// notification, due `gather` after the first like and never sooner than `interval` after the member's last digest,
/// so a member hears of likes at most once per interval. Pure: `LikesDigestTests` walks it.
struct LikesDigest: Sendable, Hashable {
    /// `KINDRED_NOTIFY_LIKES_DIGEST_MS`: the least time between two digests to one member.
    var interval: Duration

    /// Every digest has this collapse key: a new one replaces the last on the device.
    static let collapseKey = "likes"

    /// How long the first like of a digest waits for others (when the last digest is long past): a minute, or the
    /// interval when shorter.
    var gather: Duration { min(self.interval, .seconds(60)) }

    enum Action: Sendable, Hashable {
        /// Add the like to the waiting digest `id`.
        case join(String)
        /// Queue a new digest due at this instant (UTC ms).
        case queue(dueUnixMs: Int64)
    }

    func action(waiting: WaitingNotification?, nowUnixMs: Int64, lastSentUnixMs: Int64?) -> Action {
        if let waiting, waiting.takesMore { return .join(waiting.id) }
        return .queue(dueUnixMs: self.due(nowUnixMs: nowUnixMs, lastSentUnixMs: lastSentUnixMs))
    }

    /// When a digest whose first like comes now is due.
    func due(nowUnixMs: Int64, lastSentUnixMs: Int64?) -> Int64 {
        let gathered = nowUnixMs + Self.milliseconds(self.gather)
        guard let last = lastSentUnixMs else { return gathered }
        return max(gathered, last + Self.milliseconds(self.interval))
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}
