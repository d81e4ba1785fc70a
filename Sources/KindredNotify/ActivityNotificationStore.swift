import KindredPostgres

/// The SQL that queues activity broadcasts' notifications (table `notifications`, kind 'activity'), one
/// statement per ActivityStarted event however many followers it names.
struct ActivityNotificationStore: Sendable {
    /// Holds the activity locks of `members` until the transaction ends, taken in the order given (sorted:
    /// ``EventBatchLocks``). An ActivityStarted takes its broadcaster's, a UserBlocked both members': a block and a
    /// broadcast applied at once are ordered, so that either the broadcast commits first (and the block's
    /// cancellation takes what it queued) or its statement, after the lock, sees the block and queues nothing for
    /// the pair.
    func lock(activitiesOf members: [String], in transaction: PostgresTransaction) async throws {
        try await AdvisoryLocks.take(members, class: Self.lockClass, in: transaction)
    }

    /// The first key of the activity locks (the second is the member's hash), apart from notify's other locks.
    private static let lockClass: Int32 = 0x6e74_6163  // "ntac"

    /// Queues one notification per follower in `followers` (ids paired with `ids`, the notifications' ids)
    /// who did not turn activities off, whose account was not deleted since match listed them (a tombstone in
    /// `deleted_members`) and who neither blocked the broadcaster nor was blocked by them since (`blocks`), about
    /// `broadcaster`, from the broadcast `source`: idempotent per (follower, broadcast), so a redelivered event
    /// queues nothing more. Returns how many were queued.
    func enqueue(
        ids: [String],
        followers: [String],
        about broadcaster: String,
        source: String,
        activity: String,
        expires: PostgresTimestamp,
        in runner: some SQLRunner
    ) async throws -> Int {
        try await runner.execute(
            """
            INSERT INTO notifications (notification_id, user_id, kind, subject_user_id, source_id, collapse_key, activity,
                                       expires_at)
            SELECT f.id, f.follower, 'activity', \(broadcaster)::uuid, \(source), \("activity-" + broadcaster),
                   NULLIF(\(activity), ''), \(expires)
            FROM unnest(\(ids)::uuid[], \(followers)::uuid[]) AS f (id, follower)
            LEFT JOIN settings s ON s.user_id = f.follower
            WHERE coalesce(s.activities, true)
              AND NOT EXISTS (SELECT 1 FROM deleted_members d WHERE d.user_id = f.follower)
              AND NOT EXISTS (SELECT 1 FROM blocks b
                              WHERE b.active AND ((b.blocker_id = f.follower AND b.blocked_id = \(broadcaster)::uuid)
                                               OR (b.blocker_id = \(broadcaster)::uuid AND b.blocked_id = f.follower)))
            ON CONFLICT (user_id, kind, source_id) DO NOTHING
            """
        )
    }
}
