/// The rules of activity broadcasts as values, without I/O (`ActivityRulesTests`): which communities have them,
/// which activity a start may name, and whether a start tells the followers or falls in the notify interval of
/// the member's last start that did.
struct ActivityRules: Sendable, Hashable {
    /// How long a broadcast shows (`KINDRED_MATCH_ACTIVITY_DURATION_MS`).
    var durationMs: Int64
    /// The least time between two starts that tell the followers (`KINDRED_MATCH_ACTIVITY_NOTIFY_INTERVAL_MS`).
    var notifyIntervalMs: Int64

    /// Followers per ActivityStarted event: 10,000 followers are ten events of 37 kB of ids, each far under the
    /// relay's message limit.
    static let followersPerEvent = 1000

    enum Refusal: Equatable, Sendable {
        /// A mutual community: nobody follows anyone there.
        case notAFollowCommunity
        /// Not one of the community's "activities" values (a community without the attribute accepts none).
        case unknownActivity
    }

    /// Why a start in a community with `settings` naming `activity` is refused, or nil.
    func refusal(activity: String, settings: CommunitySettingsRow) -> Refusal? {
        guard settings.mode == .oneWay else { return .notAFollowCommunity }
        guard activity.isEmpty || settings.activities.contains(activity) else { return .unknownActivity }
        return nil
    }

    /// Whether a start at `now` tells the followers, given when the member's last start that did was (nil: never),
    /// and when the next one could.
    func notifies(lastNotifiedUnixMs: Int64?, nowUnixMs: Int64) -> (notify: Bool, nextNotifyUnixMs: Int64) {
        guard let last = lastNotifiedUnixMs, nowUnixMs - last < self.notifyIntervalMs else {
            return (true, nowUnixMs + self.notifyIntervalMs)
        }
        return (false, last + self.notifyIntervalMs)
    }

    /// Rows of the member's older starts that no rule needs any more: ended or expired, and started before both
    /// the notify interval and a day (a retry of a start stays a replay for at least a day).
    func purgeBeforeUnixMs(nowUnixMs: Int64) -> Int64 {
        nowUnixMs - max(self.notifyIntervalMs, 86_400_000, self.durationMs)
    }
}
