import KindredPostgres
import KindredProto

/// A match row with the other participant, as lists show it.
struct MatchRow: Sendable, Hashable {
    var record: MatchRecord
    var other: String
    var endedUnixMs: Int64?
}

/// The SQL of matches and connections (table `matches`) and of the lists built on swipes ("who liked me").
struct MatchStore: Sendable {
    private static let columns = """
        m.match_id::text, m.mode::int4, m.initiator::text, m.created_at, m.reciprocated_at, m.ended_at,
        m.user_low::text, m.user_high::text
        """

    private func row(_ row: PostgresRow, viewer: String) throws -> MatchRow {
        let low = try row.decode(String.self, at: 6)
        let high = try row.decode(String.self, at: 7)
        return MatchRow(
            record: MatchRecord(
                id: try row.decode(String.self, at: 0),
                mode: MatchMode(rawValue: try row.decode(Int32.self, at: 1)) ?? .mutual,
                initiator: try row.decode(String.self, at: 2),
                createdUnixMs: try row.decode(PostgresTimestamp.self, at: 3).millisecondsSinceEpoch,
                reciprocatedUnixMs: try row.decode(PostgresTimestamp?.self, at: 4)?.millisecondsSinceEpoch
            ),
            other: low == viewer ? high : low,
            endedUnixMs: try row.decode(PostgresTimestamp?.self, at: 5)?.millisecondsSinceEpoch
        )
    }

    /// The viewer's active matches, newest first, hiding partners whose account is deactivated. `direction`:
    /// 0 all, 1 mutual, 2 outgoing, 3 incoming (ConnectionDirection). Returns up to `limit` rows.
    func list(
        viewer: String, direction: Int32, limit: Int, offset: Int, on database: PostgresClient
    ) async throws -> [MatchRow] {
        try await database.query(
            """
            SELECT \(unescaped: Self.columns) FROM matches m
            LEFT JOIN members o ON o.user_id = CASE WHEN m.user_low = \(viewer)::uuid THEN m.user_high ELSE m.user_low END
            WHERE (m.user_low = \(viewer)::uuid OR m.user_high = \(viewer)::uuid) AND m.ended_at IS NULL
              AND NOT COALESCE(o.deactivated, false)
              AND CASE \(direction)::int4
                  WHEN 1 THEN m.mode = 1 OR m.reciprocated_at IS NOT NULL
                  WHEN 2 THEN m.mode = 2 AND m.reciprocated_at IS NULL AND m.initiator = \(viewer)::uuid
                  WHEN 3 THEN m.mode = 2 AND m.reciprocated_at IS NULL AND m.initiator <> \(viewer)::uuid
                  ELSE true END
            ORDER BY m.created_at DESC, m.match_id DESC
            LIMIT \(limit) OFFSET \(offset)
            """
        ).map { try self.row($0, viewer: viewer) }
    }

    /// The match with this id if `viewer` takes part in it (active or ended), locked.
    func lock(matchID: String, viewer: String, in transaction: PostgresTransaction) async throws -> MatchRow? {
        try await transaction.query(
            """
            SELECT \(unescaped: Self.columns) FROM matches m
            WHERE m.match_id = \(matchID)::uuid AND (m.user_low = \(viewer)::uuid OR m.user_high = \(viewer)::uuid)
            FOR UPDATE
            """
        ).first.map { try self.row($0, viewer: viewer) }
    }

    /// The active match of a pair, locked.
    func lockActive(_ a: String, _ b: String, in transaction: PostgresTransaction) async throws -> MatchRow? {
        let (low, high) = a < b ? (a, b) : (b, a)
        return try await transaction.query(
            """
            SELECT \(unescaped: Self.columns) FROM matches m
            WHERE m.user_low = \(low)::uuid AND m.user_high = \(high)::uuid AND m.ended_at IS NULL FOR UPDATE
            """
        ).first.map { try self.row($0, viewer: a) }
    }

    /// Ends a match: `by` nil for system ends; `reason` a MatchEndReason value.
    func end(matchID: String, by: String?, reason: Int32, in transaction: PostgresTransaction) async throws {
        try await transaction.execute(
            """
            UPDATE matches SET ended_at = now(), ended_by = \(by)::uuid, end_reason = \(reason)::int2
            WHERE match_id = \(matchID)::uuid AND ended_at IS NULL
            """)
    }

    /// People who liked the viewer and whom the viewer has not swiped, newest first: the policy's `likesReceived`
    /// (``VisibilityPolicy``) in SQL — not blocked either way, not deactivated, eligible (or connected with the
    /// viewer: one-way likes), and no ended match between them (an unmatched person does not come back as a like).
    func likesReceived(viewer: String, limit: Int, offset: Int, on database: PostgresClient) async throws
        -> (likes: [(String, Int64)], total: Int)
    {
        let results = try await database.pipeline([
            """
            SELECT s.swiper::text, s.swiped_at FROM swipes s
            LEFT JOIN members o ON o.user_id = s.swiper
            WHERE s.target = \(viewer)::uuid AND s.action = 1 AND NOT COALESCE(o.deactivated, false)
              AND (COALESCE(o.eligible, false) OR EXISTS (SELECT 1 FROM matches a WHERE a.ended_at IS NULL
                   AND a.user_low = least(\(viewer)::uuid, s.swiper) AND a.user_high = greatest(\(viewer)::uuid, s.swiper)))
              AND NOT EXISTS (SELECT 1 FROM swipes mine WHERE mine.swiper = \(viewer)::uuid AND mine.target = s.swiper)
              AND NOT EXISTS (SELECT 1 FROM blocks b WHERE (b.blocker = \(viewer)::uuid AND b.blocked = s.swiper)
                                                      OR (b.blocker = s.swiper AND b.blocked = \(viewer)::uuid))
              AND NOT EXISTS (SELECT 1 FROM matches m WHERE m.user_low = least(\(viewer)::uuid, s.swiper)
                              AND m.user_high = greatest(\(viewer)::uuid, s.swiper) AND m.ended_at IS NOT NULL)
            ORDER BY s.swiped_at DESC, s.swiper DESC LIMIT \(limit) OFFSET \(offset)
            """,
            """
            SELECT count(*) FROM (
                SELECT 1 FROM swipes s
                LEFT JOIN members o ON o.user_id = s.swiper
                WHERE s.target = \(viewer)::uuid AND s.action = 1 AND NOT COALESCE(o.deactivated, false)
              AND (COALESCE(o.eligible, false) OR EXISTS (SELECT 1 FROM matches a WHERE a.ended_at IS NULL
                   AND a.user_low = least(\(viewer)::uuid, s.swiper) AND a.user_high = greatest(\(viewer)::uuid, s.swiper)))
                  AND NOT EXISTS (SELECT 1 FROM swipes mine WHERE mine.swiper = \(viewer)::uuid AND mine.target = s.swiper)
                  AND NOT EXISTS (SELECT 1 FROM blocks b WHERE (b.blocker = \(viewer)::uuid AND b.blocked = s.swiper)
                                                          OR (b.blocker = s.swiper AND b.blocked = \(viewer)::uuid))
                  AND NOT EXISTS (SELECT 1 FROM matches m WHERE m.user_low = least(\(viewer)::uuid, s.swiper)
                                  AND m.user_high = greatest(\(viewer)::uuid, s.swiper) AND m.ended_at IS NOT NULL)
                LIMIT 10000
            ) AS capped
            """,
        ])
        let likes = try results[0].map {
            (try $0.decode(String.self, at: 0), try $0.decode(PostgresTimestamp.self, at: 1).millisecondsSinceEpoch)
        }
        return (likes, Int(try results[1].scalar(Int64.self)))
    }

    /// Of `candidates`, those the viewer may still see, in order: not swiped by the viewer, not passed on the
    /// viewer, not blocked either way, not matched.
    /// `othersDecisions` false (a user asking for themself): only the viewer's own swipes and blocks and the
    /// pair's matches count, so the answer cannot reveal a pass on the viewer or a block of the viewer.
    func unseen(viewer: String, candidates: [String], othersDecisions: Bool, on database: PostgresClient) async throws
        -> [String]
    {
        try await database.query(
            """
            SELECT x.c::text FROM unnest(\(candidates)::uuid[]) WITH ORDINALITY AS x(c, ord)
            WHERE x.c <> \(viewer)::uuid
              AND NOT EXISTS (SELECT 1 FROM swipes s WHERE s.swiper = \(viewer)::uuid AND s.target = x.c)
              AND NOT (\(othersDecisions) AND EXISTS (SELECT 1 FROM swipes s WHERE s.swiper = x.c
                                                    AND s.target = \(viewer)::uuid AND s.action = 2))
              AND NOT EXISTS (SELECT 1 FROM blocks b WHERE (b.blocker = \(viewer)::uuid AND b.blocked = x.c)
                                                      OR (\(othersDecisions) AND b.blocker = x.c AND b.blocked = \(viewer)::uuid))
              AND NOT EXISTS (SELECT 1 FROM matches m WHERE m.user_low = least(\(viewer)::uuid, x.c)
                              AND m.user_high = greatest(\(viewer)::uuid, x.c) AND m.ended_at IS NULL)
            ORDER BY x.ord
            """
        ).map { try $0.decode(String.self, at: 0) }
    }

    /// Per other user: blocked either way, the active match, the viewer's own swipe (1 like, 2 pass, 0 none).
    /// `othersDecisions` false (a user asking for themself): `blocked` only for the viewer's own blocks.
    func relations(viewer: String, others: [String], othersDecisions: Bool, on database: PostgresClient) async throws
        -> [String: (blocked: Bool, match: MatchRecord?, swipe: Int32)]
    {
        let rows = try await database.query(
            """
            SELECT x.o::text,
                   EXISTS (SELECT 1 FROM blocks b WHERE (b.blocker = \(viewer)::uuid AND b.blocked = x.o)
                                                   OR (\(othersDecisions) AND b.blocker = x.o AND b.blocked = \(viewer)::uuid)),
                   m.match_id::text, m.mode::int4, m.initiator::text, m.created_at, m.reciprocated_at,
                   COALESCE(s.action::int4, 0)
            FROM unnest(\(others)::uuid[]) AS x(o)
            LEFT JOIN matches m ON m.user_low = least(\(viewer)::uuid, x.o) AND m.user_high = greatest(\(viewer)::uuid, x.o)
                               AND m.ended_at IS NULL
            LEFT JOIN swipes s ON s.swiper = \(viewer)::uuid AND s.target = x.o
            """)
        var relations: [String: (blocked: Bool, match: MatchRecord?, swipe: Int32)] = [:]
        for row in rows {
            var match: MatchRecord?
            if let id = try row.decode(String?.self, at: 2) {
                match = MatchRecord(
                    id: id,
                    mode: MatchMode(rawValue: try row.decode(Int32.self, at: 3)) ?? .mutual,
                    initiator: try row.decode(String.self, at: 4),
                    createdUnixMs: try row.decode(PostgresTimestamp.self, at: 5).millisecondsSinceEpoch,
                    reciprocatedUnixMs: try row.decode(PostgresTimestamp?.self, at: 6)?.millisecondsSinceEpoch)
            }
            relations[try row.decode(String.self, at: 0)] = (try row.decode(Bool.self, at: 1), match, try row.decode(Int32.self, at: 7))
        }
        return relations
    }
}
