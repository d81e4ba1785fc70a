import KindredProto

/// One activity broadcast as `activity_broadcasts` holds it (times in UTC ms).
struct ActivityBroadcastRow: Sendable, Hashable {
    var id: String
    var user: String
    var activity: String
    var startedUnixMs: Int64
    var expiresUnixMs: Int64
    var notified: Bool

    var message: MatchApi.ActivityBroadcast {
        .with {
            $0.broadcastId = self.id
            $0.userId = self.user
            $0.activity = self.activity
            $0.startedUnixMs = self.startedUnixMs
            $0.expiresUnixMs = self.expiresUnixMs
        }
    }
}
