import KindredPostgres
import KindredProto
import KindredServiceKit

/// The SQL of activity broadcasts (table `activity_broadcasts`) and of who follows whom for them (`matches` of
/// one-way communities, `blocks`, `members`).
struct ActivityStore: Sendable {
    private static let columns = """
        broadcast_id::text, user_id::text, activity, started_at, expires_at, notified
        """

    private func broadcast(_ row: PostgresRow) throws -> ActivityBroadcastRow {
        ActivityBroadcastRow(
            id: try row.decode(String.self, at: 0),
            user: try row.decode(String.self, at: 1),
            activity: try row.decode(String.self, at: 2),
            startedUnixMs: try row.decode(PostgresTimestamp.self, at: 3).millisecondsSinceEpoch,
            expiresUnixMs: try row.decode(PostgresTimestamp.self, at: 4).millisecondsSinceEpoch,
            notified: try row.decode(Bool.self, at: 5)
        )
    }

    /// One start at a time per member (the notify interval and "the active broadcast" are per member).
    func lockMember(_ user: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute("SELECT pg_advisory_xact_lock(hashtextextended('activity:' || \(user), 0))")
    }

    /// The start `user` made with `key`, for a replay.
    func started(by user: String, key: String, in transaction: PostgresTransaction) async throws
        -> ActivityBroadcastRow?
    {
        try await transaction.query(
            """
            SELECT \(unescaped: Self.columns) FROM activity_broadcasts
            WHERE user_id = \(user)::uuid AND idempotency_key = \(key)
            """
        ).first.map(self.broadcast)
    }

    /// When `user` last started a broadcast that told their followers.
    func lastNotified(by user: String, in transaction: PostgresTransaction) async throws -> Int64? {
        try await transaction.query(
            """
            SELECT started_at FROM activity_broadcasts WHERE user_id = \(user)::uuid AND notified
            ORDER BY started_at DESC LIMIT 1
            """
        ).first.map { try $0.decode(PostgresTimestamp.self, at: 0).millisecondsSinceEpoch }
    }

    /// Ends `user`'s active broadcast (if any) and returns its id.
    func stop(_ user: String, at now: PostgresTimestamp, in transaction: PostgresTransaction) async throws -> String? {
        try await transaction.query(
            """
            UPDATE activity_broadcasts SET ended_at = \(now)
            WHERE user_id = \(user)::uuid AND ended_at IS NULL AND expires_at > \(now)
            RETURNING broadcast_id::text
            """
        ).first.map { try $0.decode(String.self, at: 0) }
    }

    /// Records a start; a start before it that is still marked active is ended (one active broadcast per member),
    /// and rows older than `purgeBefore` go.
    func start(
        _ broadcast: ActivityBroadcastRow,
        community: String,
        key: String,
        purgeBefore: PostgresTimestamp,
        in transaction: PostgresTransaction
    ) async throws {
        let started = PostgresTimestamp(millisecondsSinceEpoch: broadcast.startedUnixMs)
        _ = try await transaction.pipeline([
            """
            UPDATE activity_broadcasts SET ended_at = \(started) WHERE user_id = \(broadcast.user)::uuid AND ended_at IS NULL
            """,
            """
            DELETE FROM activity_broadcasts
            WHERE user_id = \(broadcast.user)::uuid AND started_at < \(purgeBefore)
              AND (ended_at IS NOT NULL OR expires_at < \(started))
            """,
            """
            INSERT INTO activity_broadcasts (broadcast_id, user_id, community_id, activity, started_at, expires_at, notified,
                                             idempotency_key)
            VALUES (\(broadcast.id)::uuid, \(broadcast.user)::uuid, \(community), \(broadcast.activity), \(started),
                    \(PostgresTimestamp(millisecondsSinceEpoch: broadcast.expiresUnixMs)), \(broadcast.notified), \(key))
            """,
        ])
    }

    /// Who follows `user` and may hear of their broadcast, with the facts ``VisibilityPolicy`` judges from each
    /// follower's side: the other side of each active one-way connection that `user` did not start alone (they
    /// followed `user`, or `user` followed back), active members only (a deactivated account gets no pushes), and
    /// the blocks between them.
    func followers(of user: String, in transaction: PostgresTransaction) async throws
        -> [(follower: String, facts: MemberRelation.Facts)]
    {
        try await transaction.query(
            """
            WITH followers AS (
                SELECT user_high AS follower FROM matches
                WHERE user_low = \(user)::uuid AND ended_at IS NULL AND mode = 2
                  AND (initiator <> \(user)::uuid OR reciprocated_at IS NOT NULL)
                UNION ALL
                SELECT user_low FROM matches
                WHERE user_high = \(user)::uuid AND ended_at IS NULL AND mode = 2
                  AND (initiator <> \(user)::uuid OR reciprocated_at IS NOT NULL)
            )
            SELECT f.follower::text,
                   EXISTS (SELECT 1 FROM blocks b WHERE b.blocker = f.follower AND b.blocked = \(user)::uuid),
                   EXISTS (SELECT 1 FROM blocks b WHERE b.blocker = \(user)::uuid AND b.blocked = f.follower)
            FROM followers f
            JOIN members m ON m.user_id = f.follower AND NOT m.deactivated
            ORDER BY 1
            """
        ).map { row in
            (
                follower: try row.decode(String.self, at: 0),
                facts: MemberRelation.Facts(
                    blockedByViewer: try row.decode(Bool.self, at: 1),
                    blockedByMember: try row.decode(Bool.self, at: 2),
                    match: .connected
                )
            )
        }
    }

    /// The active broadcasts of members `viewer` follows (their own follow, or a mutual connection), newest first,
    /// each with the facts ``VisibilityPolicy`` judges (the member's account and community, `viewer` being of
    /// `community`, and blocks either way). At most one row per followed member (a start ends their earlier one).
    func followed(by viewer: String, of community: String, at now: PostgresTimestamp, on database: PostgresClient)
        async throws -> [(broadcast: ActivityBroadcastRow, facts: MemberRelation.Facts)]
    {
        try await database.query(
            """
            WITH followed AS (
                SELECT user_high AS member FROM matches
                WHERE user_low = \(viewer)::uuid AND ended_at IS NULL AND mode = 2
                  AND (initiator = \(viewer)::uuid OR reciprocated_at IS NOT NULL)
                UNION ALL
                SELECT user_low FROM matches
                WHERE user_high = \(viewer)::uuid AND ended_at IS NULL AND mode = 2
                  AND (initiator = \(viewer)::uuid OR reciprocated_at IS NOT NULL)
            )
            SELECT a.broadcast_id::text, a.user_id::text, a.activity, a.started_at, a.expires_at, a.notified,
                   m.community_id, COALESCE(m.deactivated, false), COALESCE(m.eligible, false),
                   EXISTS (SELECT 1 FROM blocks b WHERE b.blocker = \(viewer)::uuid AND b.blocked = f.member),
                   EXISTS (SELECT 1 FROM blocks b WHERE b.blocker = f.member AND b.blocked = \(viewer)::uuid)
            FROM followed f
            JOIN activity_broadcasts a ON a.user_id = f.member AND a.ended_at IS NULL AND a.expires_at > \(now)
            LEFT JOIN members m ON m.user_id = f.member
            ORDER BY a.started_at DESC
            """
        ).map { row in
            let memberCommunity = try row.decode(String?.self, at: 6)
            return (
                broadcast: try self.broadcast(row),
                facts: MemberRelation.Facts(
                    exists: memberCommunity != nil,
                    sameCommunity: memberCommunity == community,
                    deactivated: try row.decode(Bool.self, at: 7),
                    eligible: try row.decode(Bool.self, at: 8),
                    blockedByViewer: try row.decode(Bool.self, at: 9),
                    blockedByMember: try row.decode(Bool.self, at: 10),
                    match: .connected
                )
            )
        }
    }
}
