import KindredPostgres
import KindredProto
import KindredServiceKit

extension NotifyService {
    /// match's ActivityStarted: one notification to each follower it names who did not turn activities off
    /// (match left out followers blocked either way and deactivated ones; a block applied before it, or at once,
    /// leaves the pair out; a later block, unmatch or deletion cancels what is still pending, as for every
    /// notification about a member), cancelled unsent once the
    /// broadcast expires. Ids are checked; a follower equal to the broadcaster is ignored.
    func queueActivity(
        _ started: Kindred.Common.V1.ActivityStarted,
        by broadcaster: String,
        holding held: EventBatchLocks,
        in transaction: PostgresTransaction
    )
        async throws
    {
        let broadcast = started.broadcastId.lowercased()
        guard UUIDv7.isValid(broadcaster), UUIDv7.isValid(broadcast) else {
            self.logger.error("ActivityStarted without a valid broadcaster or broadcast: ignored")
            return
        }
        let followers = Array(
            Set(started.followerUserIds.map { $0.lowercased() }.filter { UUIDv7.isValid($0) && $0 != broadcaster })
        )
        guard !followers.isEmpty,
            started.expiresUnixMs > PostgresTimestamp.now.millisecondsSinceEpoch
        else { return }
        // Ordered with a block of the broadcaster applied at once (``ActivityNotificationStore/lock(activitiesOf:in:)``).
        if !held.holds(activitiesOf: broadcaster) {
            try await self.activityNotifications.lock(activitiesOf: [broadcaster], in: transaction)
        }
        let queued = try await self.activityNotifications.enqueue(
            ids: try followers.map { _ in try UUIDv7.generate() },
            followers: followers,
            about: broadcaster,
            source: broadcast,
            activity: started.activity,
            expires: PostgresTimestamp(millisecondsSinceEpoch: started.expiresUnixMs),
            in: transaction
        )
        self.logger.debug("activity notifications queued", metadata: ["notifications.count": "\(queued)"])
    }
}
