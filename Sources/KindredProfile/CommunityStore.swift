import KindredPostgres
import KindredProto

/// The SQL of the `communities` aggregate (table `communities`). Settings are stored protobuf-encoded.
struct CommunityStore: Sendable {
    typealias Community = Kindred.Common.V1.Community

    static let columns =
        "id, display_name, settings, version, (extract(epoch FROM created_at) * 1000)::bigint, (extract(epoch FROM updated_at) * 1000)::bigint"

    static func decode(_ row: PostgresRow) throws -> Community {
        let (id, name, settings, version, created, updated) = try row.decode(
            (String, String, [UInt8], Int64, Int64, Int64).self)
        return .with {
            $0.communityId = id
            $0.displayName = name
            $0.settings = try? Kindred.Common.V1.CommunitySettings(serializedBytes: settings)
            $0.version = version
            $0.createdUnixMs = created
            $0.updatedUnixMs = updated
        }
    }

    func find(_ id: String, in database: PostgresClient) async throws -> Community? {
        let rows = try await database.query("SELECT \(unescaped: Self.columns) FROM communities WHERE id = \(id)")
        return try rows.first.map(Self.decode)
    }

    func find(_ id: String, in transaction: PostgresTransaction) async throws -> Community? {
        let rows = try await transaction.query("SELECT \(unescaped: Self.columns) FROM communities WHERE id = \(id)")
        return try rows.first.map(Self.decode)
    }

    /// The community locked for an update.
    func lock(_ id: String, in transaction: PostgresTransaction) async throws -> Community? {
        let rows = try await transaction.query(
            "SELECT \(unescaped: Self.columns) FROM communities WHERE id = \(id) FOR UPDATE")
        return try rows.first.map(Self.decode)
    }

    /// A page of communities ordered by id.
    func list(offset: Int, limit: Int, in database: PostgresClient) async throws -> [Community] {
        let rows = try await database.query(
            "SELECT \(unescaped: Self.columns) FROM communities ORDER BY id OFFSET \(Int64(offset)) LIMIT \(Int64(limit))")
        return try rows.map(Self.decode)
    }

    /// Inserts a new community (version 1); false when the id is taken.
    func insert(_ community: Community, in transaction: PostgresTransaction) async throws -> Community? {
        let settings = try (community.settings ?? .init()).serializedBytes()
        let rows = try await transaction.query(
            """
            INSERT INTO communities (id, display_name, settings) VALUES (\(community.communityId), \(community.displayName), \(settings))
            ON CONFLICT (id) DO NOTHING RETURNING \(unescaped: Self.columns)
            """)
        return try rows.first.map(Self.decode)
    }

    /// Writes the name and settings and increments the version.
    func update(_ community: Community, in transaction: PostgresTransaction) async throws -> Community {
        let settings = try (community.settings ?? .init()).serializedBytes()
        let rows = try await transaction.query(
            """
            UPDATE communities SET display_name = \(community.displayName), settings = \(settings),
                version = version + 1, updated_at = now()
            WHERE id = \(community.communityId) RETURNING \(unescaped: Self.columns)
            """)
        return try Self.decode(rows[0])
    }
}
