import Foundation
import KindredPostgres
import KindredProto
import KindredServiceKit

/// The SQL of swipes: the batch load and write of the group commit, and undo. Tables `swipes`, `undos`,
/// `matches` (created / reciprocated by swipes), `blocks` and the projections `members`, `communities` (read).
struct SwipeStore: Sendable {
    /// Takes the pair's advisory lock until the end of `transaction` (`a == b`: the user's own lock, which undo
    /// takes so one undo runs at a time per user).
    func lockPair(_ a: String, _ b: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute("SELECT pg_advisory_xact_lock(\(Self.pairLockKey(a, b)))")
    }

    /// The advisory lock key of an unordered pair: two likes of one pair serialize on it, so the second sees the
    /// first committed and exactly one match is made.
    static func pairLockKey(_ a: String, _ b: String) -> Int64 {
        let (low, high) = a < b ? (a, b) : (b, a)
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a 64
        for byte in (low + "|" + high).utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return Int64(bitPattern: hash)
    }

    /// Locks the pairs (ascending key order, so two batches cannot deadlock on them), then loads the facts of
    /// every command: BEGIN, locks and load in one pipeline (one round trip).
    func beginAndLoad(
        _ commands: [SwipeCommand],
        now: PostgresTimestamp,
        on connection: PostgresConnection
    ) async throws -> [SwipeFacts] {
        try Self.facts(from: try await connection.pipeline(Self.beginAndLoadQueries(commands, now: now))[2])
    }

    /// One batch's writes and COMMIT, then the next batch's BEGIN, pair locks and load, in one round trip: two
    /// groups of one pipeline, so the outcome of each is known on its own (when the first fails, its transaction
    /// is aborted and the second fails with it). Throws only when the connection was lost, and then whether the
    /// first committed is unknown.
    func commitAndBeginNext(
        _ writes: [PostgresQuery],
        next: [SwipeCommand],
        now: PostgresTimestamp,
        on connection: PostgresConnection
    ) async throws -> (committed: Result<Void, any Error>, next: Result<[SwipeFacts], any Error>) {
        let outcomes = try await connection.pipeline(groups: [writes, Self.beginAndLoadQueries(next, now: now)])
        let committed = Result<Void, any Error> { try Self.checkCommitted(try outcomes[0].get()) }
        let loaded = Result<[SwipeFacts], any Error> { try Self.facts(from: try outcomes[1].get()[2]) }
        return (committed, loaded)
    }

    /// BEGIN, the pair locks and the load of the facts of `commands` (the load is the third statement).
    private static func beginAndLoadQueries(_ commands: [SwipeCommand], now: PostgresTimestamp) -> [PostgresQuery] {
        let keys = Array(Set(commands.map { Self.pairLockKey($0.swiper, $0.target) })).sorted()
        let swipers = commands.map(\.swiper)
        let targets = commands.map(\.target)
        let since = PostgresTimestamp(microsecondsSinceEpoch: now.microsecondsSinceEpoch - 86_400_000_000)
        return [
            "BEGIN ISOLATION LEVEL READ COMMITTED",
            "SELECT count(pg_advisory_xact_lock(k)) FROM unnest(\(keys)::bigint[]) AS k",
            """
            SELECT sm.community_id, sm.eligible, sm.deactivated,
                   tm.community_id, tm.eligible, tm.deactivated,
                   c.mode::int4, c.daily_like_limit,
                   EXISTS (SELECT 1 FROM blocks b WHERE (b.blocker = i.swiper AND b.blocked = i.target)
                                                     OR (b.blocker = i.target AND b.blocked = i.swiper)),
                   mine.swipe_id::text, mine.action::int4, mine.swiped_at, mine.outcome::int4, mine.match_id::text,
                   theirs.action::int4,
                   m.match_id::text, m.mode::int4, m.initiator::text, m.created_at, m.reciprocated_at,
                   likes.used, likes.oldest,
                   EXISTS (SELECT 1 FROM matches e WHERE e.user_low = least(i.swiper, i.target)
                           AND e.user_high = greatest(i.swiper, i.target) AND e.ended_at IS NOT NULL)
            FROM unnest(\(swipers)::uuid[], \(targets)::uuid[]) WITH ORDINALITY AS i(swiper, target, ord)
            LEFT JOIN members sm ON sm.user_id = i.swiper
            LEFT JOIN members tm ON tm.user_id = i.target
            LEFT JOIN communities c ON c.community_id = sm.community_id
            LEFT JOIN swipes mine ON mine.swiper = i.swiper AND mine.target = i.target
            LEFT JOIN swipes theirs ON theirs.swiper = i.target AND theirs.target = i.swiper
            LEFT JOIN matches m ON m.user_low = least(i.swiper, i.target) AND m.user_high = greatest(i.swiper, i.target)
                               AND m.ended_at IS NULL
            CROSS JOIN LATERAL (
                SELECT count(*) AS used, min(l.swiped_at) AS oldest FROM swipes l
                WHERE l.swiper = i.swiper AND l.swiped_at > \(since) AND l.action = 1
            ) likes
            ORDER BY i.ord
            """,
        ]
    }

    /// The facts of a batch from the rows of its load, in the commands' order.
    private static func facts(from rows: PostgresRows) throws -> [SwipeFacts] {
        try rows.map { row in
            var facts = SwipeFacts()
            facts.swiperCommunity = try row.decode(String?.self, at: 0)
            facts.swiperEligible = try row.decode(Bool?.self, at: 1) ?? false
            facts.swiperDeactivated = try row.decode(Bool?.self, at: 2) ?? false
            facts.targetCommunity = try row.decode(String?.self, at: 3)
            facts.targetEligible = try row.decode(Bool?.self, at: 4) ?? false
            facts.targetDeactivated = try row.decode(Bool?.self, at: 5) ?? false
            if let mode = try row.decode(Int32?.self, at: 6) { facts.mode = MatchMode(rawValue: mode) ?? .mutual }
            if let limit = try row.decode(Int32?.self, at: 7) { facts.dailyLikeLimit = Int(limit) }
            facts.pair.blocked = try row.decode(Bool.self, at: 8)
            if let id = try row.decode(String?.self, at: 9) {
                facts.pair.mine = SwipeRecord(
                    id: id,
                    kind: SwipeKind(rawValue: try row.decode(Int32.self, at: 10)) ?? .pass,
                    swipedUnixMs: try row.decode(PostgresTimestamp.self, at: 11).millisecondsSinceEpoch,
                    outcome: SwipeResultKind(rawValue: try row.decode(Int32.self, at: 12)) ?? .recorded,
                    matchID: try row.decode(String?.self, at: 13)
                )
            }
            facts.pair.theirs = try row.decode(Int32?.self, at: 14).flatMap(SwipeKind.init(rawValue:))
            if let id = try row.decode(String?.self, at: 15) {
                facts.pair.match = MatchRecord(
                    id: id,
                    mode: MatchMode(rawValue: try row.decode(Int32.self, at: 16)) ?? .mutual,
                    initiator: try row.decode(String.self, at: 17),
                    createdUnixMs: try row.decode(PostgresTimestamp.self, at: 18).millisecondsSinceEpoch,
                    reciprocatedUnixMs: try row.decode(PostgresTimestamp?.self, at: 19)?.millisecondsSinceEpoch
                )
            }
            facts.likesUsed = Int(try row.decode(Int64.self, at: 20))
            facts.oldestLikeUnixMs = try row.decode(PostgresTimestamp?.self, at: 21)?.millisecondsSinceEpoch
            facts.endedMatch = try row.decode(Bool.self, at: 22)
            return facts
        }
    }

    /// A swipe to insert.
    struct NewSwipe {
        var command: SwipeCommand
        var record: SwipeRecord
    }

    /// A match to insert.
    struct NewMatch {
        var a: String
        var b: String
        var community: String
        var record: MatchRecord
    }

    /// The writes of a batch and its COMMIT in one pipeline (one round trip).
    func commit(_ writes: [PostgresQuery], on connection: PostgresConnection) async throws {
        try Self.checkCommitted(try await connection.pipeline(writes))
    }

    /// A batch's writes (swipes, new and reciprocated matches, events), ending with its COMMIT.
    func writeQueries(
        swipes: [NewSwipe],
        created: [NewMatch],
        reciprocated: [MatchRecord],
        events: PostgresQuery?
    ) -> [PostgresQuery] {
        var statements: [PostgresQuery] = []
        if !swipes.isEmpty {
            let swipers = swipes.map(\.command.swiper)
            let targets = swipes.map(\.command.target)
            let communities = swipes.map(\.command.community)
            let ids = swipes.map(\.record.id)
            let actions = swipes.map { $0.record.kind.rawValue }
            let surfaces = swipes.map(\.command.surface)
            let times = swipes.map { PostgresTimestamp(millisecondsSinceEpoch: $0.record.swipedUnixMs) }
            let outcomes = swipes.map { $0.record.outcome.rawValue }
            let matchIDs = swipes.map { $0.record.matchID ?? "" }
            statements.append(
                """
                INSERT INTO swipes (swiper, target, community_id, swipe_id, action, surface, swiped_at, outcome, match_id)
                SELECT s, t, c, i, a, f, w, o, NULLIF(m, '')::uuid
                FROM unnest(\(swipers)::uuid[], \(targets)::uuid[], \(communities)::text[], \(ids)::uuid[],
                            \(actions)::int2[], \(surfaces)::text[], \(times)::timestamptz[], \(outcomes)::int2[],
                            \(matchIDs)::text[]) AS x(s, t, c, i, a, f, w, o, m)
                """)
        }
        if !created.isEmpty {
            let ids = created.map(\.record.id)
            let lows = created.map { min($0.a, $0.b) }
            let highs = created.map { max($0.a, $0.b) }
            let communities = created.map(\.community)
            let modes = created.map { $0.record.mode.rawValue }
            let initiators = created.map(\.record.initiator)
            let times = created.map { PostgresTimestamp(millisecondsSinceEpoch: $0.record.createdUnixMs) }
            let reciprocatedTimes = created.map {
                PostgresTimestamp(millisecondsSinceEpoch: $0.record.reciprocatedUnixMs ?? 0)
            }
            let isReciprocated = created.map { $0.record.reciprocatedUnixMs != nil }
            statements.append(
                """
                INSERT INTO matches (match_id, user_low, user_high, community_id, mode, initiator, created_at, reciprocated_at)
                SELECT i, l, h, c, m, n, t, CASE WHEN rr THEN r END
                FROM unnest(\(ids)::uuid[], \(lows)::uuid[], \(highs)::uuid[], \(communities)::text[], \(modes)::int2[],
                            \(initiators)::uuid[], \(times)::timestamptz[], \(reciprocatedTimes)::timestamptz[],
                            \(isReciprocated)::bool[]) AS x(i, l, h, c, m, n, t, r, rr)
                """)
        }
        if !reciprocated.isEmpty {
            let ids = reciprocated.map(\.id)
            let times = reciprocated.map { PostgresTimestamp(millisecondsSinceEpoch: $0.reciprocatedUnixMs ?? 0) }
            statements.append(
                """
                UPDATE matches SET reciprocated_at = x.t
                FROM unnest(\(ids)::uuid[], \(times)::timestamptz[]) AS x(i, t)
                WHERE matches.match_id = x.i AND matches.ended_at IS NULL
                """)
        }
        if let events { statements.append(events) }
        statements.append("COMMIT")
        return statements
    }

    /// Throws unless the last of a batch's write results is its COMMIT's (an aborted transaction answers COMMIT
    /// with ROLLBACK).
    private static func checkCommitted(_ results: [PostgresRows]) throws {
        guard results.last?.commandTag == "COMMIT" else {
            throw PostgresError(code: .queryFailed, reason: "the swipe batch was rolled back instead of committed")
        }
    }

    // MARK: Undo

    /// The caller's most recent live swipe (with its target), locked for the undo.
    func latestSwipe(of swiper: String, in transaction: PostgresTransaction) async throws -> (SwipeRecord, String)? {
        let rows = try await transaction.query(
            """
            SELECT swipe_id::text, action::int4, swiped_at, outcome::int4, match_id::text, target::text FROM swipes
            WHERE swiper = \(swiper)::uuid ORDER BY swiped_at DESC, swipe_id DESC LIMIT 1 FOR UPDATE
            """)
        guard let row = rows.first else { return nil }
        let record = SwipeRecord(
            id: try row.decode(String.self, at: 0),
            kind: SwipeKind(rawValue: try row.decode(Int32.self, at: 1)) ?? .pass,
            swipedUnixMs: try row.decode(PostgresTimestamp.self, at: 2).millisecondsSinceEpoch,
            outcome: SwipeResultKind(rawValue: try row.decode(Int32.self, at: 3)) ?? .recorded,
            matchID: try row.decode(String?.self, at: 4)
        )
        return (record, try row.decode(String.self, at: 5))
    }

    /// The target of an undone pass of `swiper` with this id; nil when it was not undone by them.
    func undoneTarget(swipeID: String, swiper: String, in transaction: PostgresTransaction) async throws -> String? {
        try await transaction.query(
            "SELECT target::text FROM undos WHERE swipe_id = \(swipeID)::uuid AND swiper = \(swiper)::uuid"
        ).first?.decode(String.self, at: 0)
    }

    /// The caller's undo times of the last 24 hours, oldest first.
    func undosSince(_ since: PostgresTimestamp, swiper: String, in transaction: PostgresTransaction) async throws
        -> [Int64]
    {
        try await transaction.query(
            """
            SELECT undone_at FROM undos WHERE swiper = \(swiper)::uuid AND undone_at > \(since) ORDER BY undone_at
            """
        ).map { try $0.decode(PostgresTimestamp.self, at: 0).millisecondsSinceEpoch }
    }

    /// Deletes the pass and records the undo.
    func undo(swipeID: String, swiper: String, target: String, at now: PostgresTimestamp, in transaction: PostgresTransaction)
        async throws
    {
        try await transaction.execute(
            "DELETE FROM swipes WHERE swiper = \(swiper)::uuid AND target = \(target)::uuid AND swipe_id = \(swipeID)::uuid")
        try await transaction.execute(
            """
            INSERT INTO undos (swipe_id, swiper, target, undone_at) VALUES (\(swipeID)::uuid, \(swiper)::uuid, \(target)::uuid, \(now))
            """)
    }
}
