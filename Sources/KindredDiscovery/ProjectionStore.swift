import KindredPostgres
import KindredProto
import KindredProtobuf

/// A stored swipe as the models learn from it.
struct SwipeRow: Sendable {
    var viewer: String
    var target: String
    var community: String
    var liked: Bool
    /// nil when either side was not indexed when the swipe arrived (it still excludes, but teaches nothing).
    var features: RankingFeatures?
    var targetInterests: InterestSet
}

/// A stored pair kept apart.
struct ExclusionRow: Sendable {
    enum Kind: Int16, Sendable {
        case block = 1
        case endedMatch = 2
    }

    var user: String
    var other: String
    var kind: Kind
}

/// All of discovery's SQL (tables `communities`, `candidates`, `swipes`, `exclusions`): the projection of
/// profile's, auth's and match's events that the in-memory index is rebuilt from.
struct ProjectionStore: Sendable {
    // MARK: Communities

    /// Stores a community if newer than the one held; true when stored.
    func upsertCommunity(_ community: Kindred.Common.V1.Community, in transaction: PostgresTransaction) async throws
        -> Bool
    {
        try await transaction.execute(
            """
            INSERT INTO communities (community_id, community, version)
            VALUES (\(community.communityId), \(try community.serializedBytes()), \(community.version))
            ON CONFLICT (community_id) DO UPDATE SET community = EXCLUDED.community, version = EXCLUDED.version
            WHERE communities.version < EXCLUDED.version
            """) == 1
    }

    func communities(only community: String?, in transaction: PostgresTransaction) async throws -> [Kindred.Common.V1.Community] {
        let rows =
            if let community {
                try await transaction.query("SELECT community FROM communities WHERE community_id = \(community)")
            } else {
                try await transaction.query("SELECT community FROM communities")
            }
        return try rows.map { try Kindred.Common.V1.Community(serializedBytes: try $0.decode([UInt8].self, at: 0)) }
    }

    func community(_ id: String, in transaction: PostgresTransaction) async throws -> Kindred.Common.V1.Community? {
        try await transaction.query("SELECT community FROM communities WHERE community_id = \(id)").first.map {
            try Kindred.Common.V1.Community(serializedBytes: try $0.decode([UInt8].self, at: 0))
        }
    }

    // MARK: Candidates

    /// Stores a snapshot if newer than the one held; returns whether it was stored and whether the account is
    /// deactivated.
    func upsertCandidate(_ snapshot: Kindred.Common.V1.CandidateSnapshot, in transaction: PostgresTransaction)
        async throws -> (applied: Bool, deactivated: Bool)
    {
        let rows = try await transaction.query(
            """
            INSERT INTO candidates (user_id, community_id, snapshot, version)
            VALUES (\(snapshot.userId)::uuid, \(snapshot.communityId), \(try snapshot.serializedBytes()), \(snapshot.version))
            ON CONFLICT (user_id) DO UPDATE SET
                community_id = EXCLUDED.community_id, snapshot = EXCLUDED.snapshot, version = EXCLUDED.version,
                indexed_at = now()
            WHERE candidates.version < EXCLUDED.version
            RETURNING deactivated
            """)
        guard let row = rows.first else { return (false, false) }
        return (true, try row.decode(Bool.self, at: 0))
    }

    /// The snapshots held of active members among `users`.
    func snapshots(of users: [String], in transaction: PostgresTransaction) async throws
        -> [Kindred.Common.V1.CandidateSnapshot]
    {
        try await transaction.query(
            "SELECT snapshot FROM candidates WHERE user_id = ANY(\(users)::uuid[]) AND NOT deactivated ORDER BY user_id"
        ).map { try Kindred.Common.V1.CandidateSnapshot(serializedBytes: try $0.decode([UInt8].self, at: 0)) }
    }

    /// Marks the account (de)activated, keeping the snapshot; returns the snapshot when one is held.
    func setDeactivated(_ deactivated: Bool, user: String, in transaction: PostgresTransaction) async throws
        -> Kindred.Common.V1.CandidateSnapshot?
    {
        try await transaction.query(
            "UPDATE candidates SET deactivated = \(deactivated) WHERE user_id = \(user)::uuid RETURNING snapshot"
        ).first.map { try Kindred.Common.V1.CandidateSnapshot(serializedBytes: try $0.decode([UInt8].self, at: 0)) }
    }

    /// Marks a candidate ineligible (RemoveCandidate): the snapshot stays with eligible = false, so a later
    /// snapshot of a newer version brings the member back.
    func markIneligible(_ user: String, in transaction: PostgresTransaction) async throws -> Bool {
        guard
            let row = try await transaction.query(
                "SELECT snapshot FROM candidates WHERE user_id = \(user)::uuid FOR UPDATE"
            ).first
        else { return false }
        var snapshot = try Kindred.Common.V1.CandidateSnapshot(serializedBytes: try row.decode([UInt8].self, at: 0))
        snapshot.eligible = false
        try await transaction.execute(
            "UPDATE candidates SET snapshot = \(try snapshot.serializedBytes()) WHERE user_id = \(user)::uuid")
        return true
    }

    // MARK: Swipes

    /// Records a swipe; false when the pair already had one (a redelivery under another event id).
    func recordSwipe(
        _ swipe: SwipeRow, swipeId: String, swipedUnixMs: Int64, in transaction: PostgresTransaction
    ) async throws -> Bool {
        let features: [Double]? = swipe.features.map { f in (0..<8).map { f.values[$0] } }
        return try await transaction.execute(
            """
            INSERT INTO swipes (viewer_id, target_id, community_id, swipe_id, liked, features, target_interests, swiped_at)
            VALUES (\(swipe.viewer)::uuid, \(swipe.target)::uuid, \(swipe.community), \(swipeId)::uuid, \(swipe.liked),
                    \(features), \(Int64(bitPattern: swipe.targetInterests.bits)),
                    \(PostgresTimestamp(millisecondsSinceEpoch: swipedUnixMs)))
            ON CONFLICT (viewer_id, target_id) DO NOTHING
            """) == 1
    }

    /// Deletes an undone swipe; returns it (for unlearning) when it was held.
    func deleteSwipe(viewer: String, target: String, swipeId: String, in transaction: PostgresTransaction) async throws
        -> SwipeRow?
    {
        try await transaction.query(
            """
            DELETE FROM swipes WHERE viewer_id = \(viewer)::uuid AND target_id = \(target)::uuid
                AND swipe_id = \(swipeId)::uuid
            RETURNING viewer_id::text, target_id::text, community_id, liked, features, target_interests
            """
        ).first.map(Self.swipe)
    }

    /// The swipes and exclusions involving one user (re-indexing a member who comes back).
    func relations(of user: String, in transaction: PostgresTransaction) async throws -> ([SwipeRow], [ExclusionRow]) {
        let swipes = try await transaction.query(
            """
            SELECT viewer_id::text, target_id::text, community_id, liked, features, target_interests FROM swipes
            WHERE viewer_id = \(user)::uuid OR target_id = \(user)::uuid
            """
        ).map(Self.swipe)
        let exclusions = try await transaction.query(
            """
            SELECT user_id::text, other_id::text, kind FROM exclusions
            WHERE user_id = \(user)::uuid OR other_id = \(user)::uuid
            """
        ).map(Self.exclusion)
        return (swipes, exclusions)
    }

    private static func swipe(_ row: PostgresRow) throws -> SwipeRow {
        let features = try row.decode([Double]?.self, at: 4)
        return SwipeRow(
            viewer: try row.decode(String.self, at: 0),
            target: try row.decode(String.self, at: 1),
            community: try row.decode(String.self, at: 2),
            liked: try row.decode(Bool.self, at: 3),
            features: features.flatMap { $0.count == 8 ? RankingFeatures(SIMD8($0)) : nil },
            targetInterests: InterestSet(bits: UInt64(bitPattern: try row.decode(Int64.self, at: 5)))
        )
    }

    // MARK: Exclusions

    /// Records a block or an ended match; false when already held.
    func exclude(_ exclusion: ExclusionRow, in transaction: PostgresTransaction) async throws -> Bool {
        try await transaction.execute(
            """
            INSERT INTO exclusions (user_id, other_id, kind)
            VALUES (\(exclusion.user)::uuid, \(exclusion.other)::uuid, \(exclusion.kind.rawValue))
            ON CONFLICT DO NOTHING
            """) == 1
    }

    /// Lifts a block; returns whether anything else still keeps the pair apart (a block the other way, an
    /// ended match).
    func unblock(blocker: String, blocked: String, in transaction: PostgresTransaction) async throws -> Bool {
        try await transaction.execute(
            """
            DELETE FROM exclusions WHERE user_id = \(blocker)::uuid AND other_id = \(blocked)::uuid
                AND kind = \(ExclusionRow.Kind.block.rawValue)
            """)
        return try await transaction.query(
            """
            SELECT 1 FROM exclusions
            WHERE (user_id = \(blocker)::uuid AND other_id = \(blocked)::uuid)
               OR (user_id = \(blocked)::uuid AND other_id = \(blocker)::uuid)
            LIMIT 1
            """
        ).first != nil
    }

    private static func exclusion(_ row: PostgresRow) throws -> ExclusionRow {
        ExclusionRow(
            user: try row.decode(String.self, at: 0), other: try row.decode(String.self, at: 1),
            kind: ExclusionRow.Kind(rawValue: try row.decode(Int16.self, at: 2)) ?? .block)
    }

    // MARK: Erasure and footprint

    /// Deletes every row about a user (AccountDeleted).
    func erase(_ user: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute("DELETE FROM candidates WHERE user_id = \(user)::uuid")
        try await transaction.execute(
            "DELETE FROM swipes WHERE viewer_id = \(user)::uuid OR target_id = \(user)::uuid")
        try await transaction.execute(
            "DELETE FROM exclusions WHERE user_id = \(user)::uuid OR other_id = \(user)::uuid")
    }

    /// Rows held about a user, per kind, zeros included.
    func footprint(_ user: String, on database: PostgresClient) async throws -> [(String, Int64)] {
        let row = try await database.query(
            """
            SELECT (SELECT count(*) FROM candidates WHERE user_id = \(user)::uuid),
                   (SELECT count(*) FROM swipes WHERE viewer_id = \(user)::uuid OR target_id = \(user)::uuid),
                   (SELECT count(*) FROM exclusions WHERE user_id = \(user)::uuid OR other_id = \(user)::uuid)
            """
        ).first!
        return [
            ("candidates", try row.decode(Int64.self, at: 0)),
            ("swipe_features", try row.decode(Int64.self, at: 1)),
            ("exclusions", try row.decode(Int64.self, at: 2)),
        ]
    }
}
