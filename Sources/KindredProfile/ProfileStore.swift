import KindredPostgres
import KindredProto

/// A stored profile with what its views need: fields (attributes included), photos, location state and account
/// state.
struct ProfileRecord: Sendable, Hashable {
    var userID: String
    var communityID: String
    var fields: Kindred.Profile.V1.ProfileFields
    /// Counts every change (the events' snapshots carry it).
    var version: Int64
    /// Counts the changes other members can see (fields, photos, community rules), not location updates: cards
    /// show it.
    var cardVersion: Int64 = 1
    var idempotencyKey: String?
    var createdUnixMs: Int64
    var updatedUnixMs: Int64
    /// The precision-7 cell; internal only, never returned to users.
    var locationCell: String?
    var locationUpdatedUnixMs: Int64 = 0
    var deactivated = false
    var photos: [PhotoRecord] = []
}

/// The SQL of the `profiles` aggregate: tables `profiles`, `attribute_values`, `locations`,
/// `deactivated_accounts`, `blocks` and `matched_pairs` (services/profile/migrations). Reads that need no lock take the client;
/// writes take the caller's transaction.
struct ProfileStore: Sendable {
    static let columns = """
        p.user_id, p.community_id, p.fields, p.version, p.idempotency_key,
        (extract(epoch FROM p.created_at) * 1000)::bigint, (extract(epoch FROM p.updated_at) * 1000)::bigint,
        l.cell, coalesce((extract(epoch FROM l.updated_at) * 1000)::bigint, 0),
        EXISTS (SELECT 1 FROM deactivated_accounts d WHERE d.user_id = p.user_id), p.card_version
        """
    static let from = "profiles p LEFT JOIN locations l ON l.user_id = p.user_id"

    static func decode(_ row: PostgresRow) throws -> ProfileRecord {
        let (userID, communityID, fieldBytes, version, key, created, updated) = try row.decode(
            (String, String, [UInt8], Int64, String?, Int64, Int64).self)
        let cell = try row.decode(String?.self, at: 7)
        let located = try row.decode(Int64.self, at: 8)
        let deactivated = try row.decode(Bool.self, at: 9)
        let cardVersion = try row.decode(Int64.self, at: 10)
        let fields = try Kindred.Profile.V1.ProfileFields(serializedBytes: fieldBytes)
        return ProfileRecord(
            userID: userID, communityID: communityID, fields: fields, version: version, cardVersion: cardVersion,
            idempotencyKey: key,
            createdUnixMs: created, updatedUnixMs: updated, locationCell: cell, locationUpdatedUnixMs: located,
            deactivated: deactivated)
    }

    /// The profile locked for a change.
    func lock(_ userID: String, in transaction: PostgresTransaction) async throws -> ProfileRecord? {
        let rows = try await transaction.query(
            "SELECT \(unescaped: Self.columns) FROM \(unescaped: Self.from) WHERE p.user_id = \(userID) FOR UPDATE OF p")
        return try rows.first.map(Self.decode)
    }

    /// Profiles of a community (or all) after `after`, ordered by user id (index backfill).
    func page(community: String?, after: String, limit: Int, in database: PostgresClient) async throws -> [ProfileRecord] {
        let rows = try await database.query(
            """
            SELECT \(unescaped: Self.columns) FROM \(unescaped: Self.from)
            WHERE (\(community)::text IS NULL OR p.community_id = \(community)) AND p.user_id > \(after)
            ORDER BY p.user_id LIMIT \(Int64(limit))
            """)
        return try rows.map(Self.decode)
    }

    /// The fields as stored in `profiles.fields` (attributes included; `attribute_values` holds a row per value
    /// as well, the footprint's "attribute_values").
    private static func storedFields(_ fields: Kindred.Profile.V1.ProfileFields) throws -> [UInt8] {
        try fields.serializedBytes()
    }

    /// Inserts a new profile (version 1); nil when the user already has one.
    func insert(
        userID: String,
        communityID: String,
        fields: Kindred.Profile.V1.ProfileFields,
        idempotencyKey: String?,
        in transaction: PostgresTransaction
    ) async throws -> Bool {
        let rows = try await transaction.query(
            """
            INSERT INTO profiles (user_id, community_id, fields, idempotency_key)
            VALUES (\(userID), \(communityID), \(try Self.storedFields(fields)), \(idempotencyKey))
            ON CONFLICT (user_id) DO NOTHING RETURNING 1
            """)
        guard !rows.isEmpty else { return false }
        try await self.replaceAttributes(userID: userID, fields.attributes, in: transaction)
        return true
    }

    /// Writes the fields (attributes replaced) and increments the version; returns the new version.
    @discardableResult
    func update(userID: String, fields: Kindred.Profile.V1.ProfileFields, in transaction: PostgresTransaction)
        async throws -> Int64
    {
        try await self.replaceAttributes(userID: userID, fields.attributes, in: transaction)
        let rows = try await transaction.query(
            """
            UPDATE profiles SET fields = \(try Self.storedFields(fields)), version = version + 1,
                card_version = card_version + 1, updated_at = now()
            WHERE user_id = \(userID) RETURNING version
            """)
        return try rows[0].decode(Int64.self, at: 0)
    }

    /// Increments the version after a change of photos, location or account state, and the card version too when
    /// other members see the change (`card`: photos yes, a location update or an account state no); returns the
    /// version.
    @discardableResult
    func touch(userID: String, card: Bool, in transaction: PostgresTransaction) async throws -> Int64 {
        let rows = try await transaction.query(
            """
            UPDATE profiles SET version = version + 1, card_version = card_version + \(card ? Int64(1) : 0),
                updated_at = now()
            WHERE user_id = \(userID) RETURNING version
            """)
        return try rows[0].decode(Int64.self, at: 0)
    }

    private func replaceAttributes(
        userID: String,
        _ values: [Kindred.Common.V1.AttributeValue],
        in transaction: PostgresTransaction
    ) async throws {
        try await transaction.execute("DELETE FROM attribute_values WHERE user_id = \(userID)")
        for value in values {
            try await transaction.execute(
                "INSERT INTO attribute_values (user_id, key, value) VALUES (\(userID), \(value.key), \(try value.serializedBytes()))")
        }
    }

    /// Stores the location cell.
    func setLocation(userID: String, cell: String, atUnixMs: Int64, in transaction: PostgresTransaction) async throws {
        let at = PostgresTimestamp(millisecondsSinceEpoch: atUnixMs)
        try await transaction.execute(
            """
            INSERT INTO locations (user_id, cell, updated_at) VALUES (\(userID), \(cell), \(at))
            ON CONFLICT (user_id) DO UPDATE SET cell = excluded.cell, updated_at = excluded.updated_at
            """)
    }

    // MARK: Account state and blocks (from events)

    func setDeactivated(_ userID: String, _ deactivated: Bool, in transaction: PostgresTransaction) async throws {
        if deactivated {
            try await transaction.execute(
                "INSERT INTO deactivated_accounts (user_id) VALUES (\(userID)) ON CONFLICT DO NOTHING")
        } else {
            try await transaction.execute("DELETE FROM deactivated_accounts WHERE user_id = \(userID)")
        }
    }

    func setBlocked(blocker: String, blocked: String, _ on: Bool, in transaction: PostgresTransaction) async throws {
        if on {
            try await transaction.execute(
                "INSERT INTO blocks (blocker_id, blocked_id) VALUES (\(blocker), \(blocked)) ON CONFLICT DO NOTHING")
        } else {
            try await transaction.execute(
                "DELETE FROM blocks WHERE blocker_id = \(blocker) AND blocked_id = \(blocked)")
        }
    }

    /// Which of `others` `viewer` blocked, was blocked by, is matched with, or had a match with that ended (one
    /// round trip).
    func relations(between viewer: String, and others: [String], in database: PostgresClient) async throws
        -> PairRelations
    {
        try Self.decodeRelations(try await database.query(Self.relationsQuery(between: viewer, and: others)))
    }

    /// The viewer's blocks both ways, live matches and ended matches with any of `others` (a pipeline may carry
    /// it: ``ProfilePageStore``).
    static func relationsQuery(between viewer: String, and others: [String]) -> PostgresQuery {
        """
        SELECT blocked_id, 0 FROM blocks WHERE blocker_id = \(viewer) AND blocked_id = ANY(\(others))
        UNION ALL SELECT blocker_id, 1 FROM blocks WHERE blocked_id = \(viewer) AND blocker_id = ANY(\(others))
        UNION ALL SELECT user_b, 2 FROM matched_pairs
            WHERE user_a = \(viewer) AND user_b = ANY(\(others)) AND NOT ended
        UNION ALL SELECT user_a, 2 FROM matched_pairs
            WHERE user_b = \(viewer) AND user_a = ANY(\(others)) AND NOT ended
        UNION ALL SELECT user_b, 3 FROM ended_pairs WHERE user_a = \(viewer) AND user_b = ANY(\(others))
        UNION ALL SELECT user_a, 3 FROM ended_pairs WHERE user_b = \(viewer) AND user_a = ANY(\(others))
        """
    }

    static func decodeRelations(_ rows: PostgresRows) throws -> PairRelations {
        var relations = PairRelations()
        for row in rows {
            let (other, kind) = try row.decode((String, Int32).self)
            switch kind {
            case 0: relations.blocked.insert(other)
            case 1: relations.blockedBy.insert(other)
            case 2: relations.matched.insert(other)
            default: relations.ended.insert(other)
            }
        }
        return relations
    }

    /// A match between two members began (MatchCreated); nothing changes if it is known, ended included.
    func recordMatch(_ matchID: String, _ users: [String], in transaction: PostgresTransaction) async throws {
        guard users.count == 2, users[0] != users[1] else { return }
        let (a, b) = users[0] < users[1] ? (users[0], users[1]) : (users[1], users[0])
        try await transaction.execute(
            """
            INSERT INTO matched_pairs (match_id, user_a, user_b) VALUES (\(matchID), \(a), \(b))
            ON CONFLICT (match_id) DO NOTHING
            """)
    }

    /// A match ended (MatchEnded): its row becomes a tombstone that names nobody, also when its MatchCreated has
    /// not arrived yet.
    /// The pair is remembered in `ended_pairs` while both members have a profile.
    func endMatch(_ matchID: String, _ users: [String], in transaction: PostgresTransaction) async throws {
        try await transaction.execute(
            """
            INSERT INTO matched_pairs (match_id, ended) VALUES (\(matchID), true)
            ON CONFLICT (match_id) DO UPDATE SET ended = true, user_a = NULL, user_b = NULL
            """)
        guard users.count == 2, users[0] != users[1] else { return }
        let (a, b) = users[0] < users[1] ? (users[0], users[1]) : (users[1], users[0])
        try await transaction.execute(
            """
            INSERT INTO ended_pairs (user_a, user_b)
            SELECT \(a), \(b) WHERE (SELECT count(*) FROM profiles WHERE user_id IN (\(a), \(b))) = 2
            ON CONFLICT DO NOTHING
            """)
    }

    // MARK: Erasure and footprint

    /// Deletes everything about the user (profile, attributes, location, photo rows, account state, blocks either
    /// way); returns the photo store keys that no remaining rendition references (to delete after commit).
    func erase(_ userID: String, in transaction: PostgresTransaction) async throws -> [String] {
        let keyRows = try await transaction.query(
            """
            SELECT DISTINCT v.blob_key FROM photo_variants v JOIN photos ph ON ph.id = v.photo_id
            WHERE ph.user_id = \(userID)
            """)
        let keys = try keyRows.map { try $0.decode(String.self, at: 0) }
        try await transaction.execute("DELETE FROM profiles WHERE user_id = \(userID)")
        try await transaction.execute("DELETE FROM deactivated_accounts WHERE user_id = \(userID)")
        try await transaction.execute("DELETE FROM blocks WHERE blocker_id = \(userID) OR blocked_id = \(userID)")
        try await transaction.execute("DELETE FROM matched_pairs WHERE user_a = \(userID) OR user_b = \(userID)")
        try await transaction.execute("DELETE FROM ended_pairs WHERE user_a = \(userID) OR user_b = \(userID)")
        return try await PhotoStore.unreferenced(keys, in: transaction)
    }

    /// Rows held about the user per kind (the contract's kinds plus "blocks", "account_states" and "matches").
    func footprint(_ userID: String, in database: PostgresClient) async throws -> [(String, Int64)] {
        let rows = try await database.query(
            """
            SELECT (SELECT count(*) FROM profiles WHERE user_id = \(userID)),
                   (SELECT count(*) FROM photos WHERE user_id = \(userID)),
                   (SELECT count(*) FROM photo_variants v JOIN photos p ON p.id = v.photo_id WHERE p.user_id = \(userID)),
                   (SELECT count(*) FROM attribute_values WHERE user_id = \(userID)),
                   (SELECT count(*) FROM locations WHERE user_id = \(userID)),
                   (SELECT count(*) FROM blocks WHERE blocker_id = \(userID) OR blocked_id = \(userID)),
                   (SELECT count(*) FROM deactivated_accounts WHERE user_id = \(userID)),
                   (SELECT count(*) FROM matched_pairs WHERE user_a = \(userID) OR user_b = \(userID))
                   + (SELECT count(*) FROM ended_pairs WHERE user_a = \(userID) OR user_b = \(userID))
            """)
        let counts = try rows[0].decode((Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64).self)
        return [
            ("profiles", counts.0), ("photos", counts.1), ("photo_variants", counts.2), ("attribute_values", counts.3),
            ("locations", counts.4), ("blocks", counts.5), ("account_states", counts.6), ("matches", counts.7),
        ]
    }
}
