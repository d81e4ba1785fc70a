import KindredPostgres

/// The SQL of the likes a waiting digest stands for (table `digest_likes`): who liked whom, until the digest is
/// sent (then `NotificationStore.finish` removes them). Only the count ever leaves notify.
struct DigestStore: Sendable {
    /// Holds `user`'s likes-digest lock until the transaction ends. Likes for one member come from many swipers, whose
    /// events are applied side by side; without the lock two of them could each find no waiting digest and queue
    /// one each. Take it before looking for the waiting digest, in a statement of its own (READ COMMITTED: the
    /// look that follows then sees a digest the other transaction committed).
    func lock(digestOf user: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute("SELECT pg_advisory_xact_lock(\(Self.lockClass), hashtext(\(user)))")
    }

    /// Holds the digest locks of `users` until the transaction ends, taken in the order given (an event batch's,
    /// sorted: ``EventBatchLocks``).
    func lock(digestsOf users: [String], in transaction: PostgresTransaction) async throws {
        try await AdvisoryLocks.take(users, class: Self.lockClass, in: transaction)
    }

    /// The first key of the digest locks (the second is the member's hash), apart from notify's member locks
    /// (`DeletedMemberStore`) and the migrations' single-key locks.
    private static let lockClass: Int32 = 0x6e74_6c6b  // "ntlk"

    /// Records that `liker` liked `user`, for digest `notification` (a like left from a digest that was cancelled
    /// moves to this one).
    func add(liker: String, to user: String, digest notification: String, in runner: some SQLRunner) async throws {
        try await runner.execute(
            """
            INSERT INTO digest_likes (user_id, liker_id, notification_id)
            VALUES (\(user)::uuid, \(liker)::uuid, \(notification)::uuid)
            ON CONFLICT (user_id, liker_id) DO UPDATE SET notification_id = EXCLUDED.notification_id
            """
        )
        try await runner.execute(
            """
            UPDATE notifications SET item_count = greatest(1, (SELECT count(*) FROM digest_likes
                                                               WHERE notification_id = \(notification)::uuid))
            WHERE notification_id = \(notification)::uuid
            """
        )
    }

    /// Likes each of the digests `notifications` stands for now, by digest (absent: none left).
    func counts(of notifications: [String], in runner: some SQLRunner) async throws -> [String: Int] {
        try self.counts(from: try await runner.query(self.countsQuery(of: notifications)))
    }

    /// The statement of ``counts(of:in:)``, for a pipeline (``ClaimedBatch``).
    func countsQuery(of notifications: [String]) -> PostgresQuery {
        """
        SELECT notification_id::text, count(*) FROM digest_likes WHERE notification_id = ANY(\(notifications)::uuid[])
        GROUP BY notification_id
        """
    }

    /// The counts ``countsQuery(of:)`` read, by digest.
    func counts(from rows: PostgresRows) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for row in rows {
            let (id, count) = try row.decode((String, Int64).self)
            counts[id] = Int(count)
        }
        return counts
    }

    /// A block, an unmatch or a match between two members: neither's like of the other is told as a like.
    func forget(between first: String, and second: String, in runner: some SQLRunner) async throws {
        try await runner.execute(
            """
            DELETE FROM digest_likes WHERE (user_id = \(first)::uuid AND liker_id = \(second)::uuid)
                                        OR (user_id = \(second)::uuid AND liker_id = \(first)::uuid)
            """
        )
    }

    /// A deactivated member's likes are no longer told.
    func forget(likesBy liker: String, in runner: some SQLRunner) async throws {
        try await runner.execute("DELETE FROM digest_likes WHERE liker_id = \(liker)::uuid")
    }

    /// Account deletion: the member's likes, given and received.
    func erase(_ user: String, in runner: some SQLRunner) async throws {
        try await runner.execute("DELETE FROM digest_likes WHERE user_id = \(user)::uuid OR liker_id = \(user)::uuid")
    }

    func count(involving user: String, in runner: some SQLRunner) async throws -> Int64 {
        try await runner.query(
            "SELECT count(*) FROM digest_likes WHERE user_id = \(user)::uuid OR liker_id = \(user)::uuid"
        ).scalar(Int64.self)
    }
}
