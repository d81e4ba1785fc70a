import KindredPostgres

/// Photo bytes in PostgreSQL (`photo_blobs`, bytea), the default: backups and erasure go with the database.
public struct PostgresPhotoBlobStore: PhotoBlobStorage {
    let database: PostgresClient

    public init(database: PostgresClient) {
        self.database = database
    }

    public func put(key: String, bytes: [UInt8]) async throws {
        try await self.database.execute(
            "INSERT INTO photo_blobs (key, data) VALUES (\(key), \(bytes)) ON CONFLICT (key) DO NOTHING")
    }

    public func get(key: String) async throws -> [UInt8]? {
        let rows = try await self.database.query("SELECT data FROM photo_blobs WHERE key = \(key)")
        return try rows.first?.decode([UInt8].self, at: 0)
    }

    public func delete(keys: [String]) async throws {
        guard !keys.isEmpty else { return }
        try await self.database.execute("DELETE FROM photo_blobs WHERE key = ANY(\(keys))")
    }

    public func count(keys: [String]) async throws -> Int {
        let rows = try await self.database.query("SELECT count(*) FROM photo_blobs WHERE key = ANY(\(keys))")
        return Int(try rows[0].decode(Int64.self, at: 0))
    }
}
