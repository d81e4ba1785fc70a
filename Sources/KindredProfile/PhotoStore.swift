import KindredPostgres
import KindredProto

/// One stored rendition of a photo: which variant and format, its size and the key of its bytes.
struct RenditionRecord: Sendable, Hashable {
    var variant: Int32
    var format: String
    var width: Int32
    var height: Int32
    var byteSize: Int32
    var blobKey: String
}

/// A stored photo and its renditions.
struct PhotoRecord: Sendable, Hashable {
    var id: String
    var userID: String
    var position: Int32
    var version: Int64
    var contentHash: [UInt8]
    var width: Int32
    var height: Int32
    var uploadKey: String?
    var createdUnixMs: Int64
    var renditions: [RenditionRecord] = []

    var message: Kindred.Profile.V1.Photo {
        .with {
            $0.photoId = self.id
            $0.position = self.position
            $0.version = self.version
            $0.width = self.width
            $0.height = self.height
            $0.createdUnixMs = self.createdUnixMs
        }
    }
}

/// The SQL of the `photos` aggregate: tables `photos` and `photo_variants` (the bytes are in a
/// `PhotoBlobStorage`).
struct PhotoStore: Sendable {
    /// Qualified by the table's name, so a join with `photo_variants` (which has `width` and `height` too) reads
    /// them unambiguously (``photosQuery(of:)``).
    static let columns = """
        photos.id::text, photos.user_id, photos.position, photos.version, photos.content_hash, photos.width,
        photos.height, photos.upload_key, (extract(epoch FROM photos.created_at) * 1000)::bigint
        """

    static func decode(_ row: PostgresRow) throws -> PhotoRecord {
        let (id, user, position, version, hash, width, height, key, created) = try row.decode(
            (String, String, Int32, Int64, [UInt8], Int32, Int32, String?, Int64).self)
        return PhotoRecord(
            id: id, userID: user, position: position, version: version, contentHash: hash, width: width,
            height: height, uploadKey: key, createdUnixMs: created)
    }

    /// The photos of several users, in position order, with their renditions.
    func photos(of userIDs: [String], in database: PostgresClient) async throws -> [String: [PhotoRecord]] {
        try Self.decodePhotos(try await database.query(Self.photosQuery(of: userIDs)))
    }

    /// The photos of `userIDs` joined with their renditions, one row per rendition (a pipeline may carry it:
    /// ``ProfilePageStore``); ``decodePhotos(_:)`` reads it.
    static func photosQuery(of userIDs: [String]) -> PostgresQuery {
        """
        SELECT \(unescaped: Self.columns),
               v.variant, v.format, v.width, v.height, v.byte_size, v.blob_key
        FROM photos LEFT JOIN photo_variants v ON v.photo_id = photos.id
        WHERE photos.user_id = ANY(\(userIDs))
        ORDER BY photos.user_id, photos.position, photos.id, v.variant, v.format
        """
    }

    /// The rows of ``photosQuery(of:)`` by user id, each user's photos in position order with their renditions.
    static func decodePhotos(_ rows: PostgresRows) throws -> [String: [PhotoRecord]] {
        var photos: [String: [PhotoRecord]] = [:]
        var last: PhotoRecord?
        for row in rows {
            var photo = try Self.decode(row)
            if let variant = try row.decode(Int32?.self, at: 9) {
                let (format, width, height, size, key) = try (
                    row.decode(String.self, at: 10), row.decode(Int32.self, at: 11), row.decode(Int32.self, at: 12),
                    row.decode(Int32.self, at: 13), row.decode(String.self, at: 14)
                )
                photo.renditions = [
                    RenditionRecord(
                        variant: variant, format: format, width: width, height: height, byteSize: size, blobKey: key)
                ]
            }
            // Rows of one photo are adjacent (ordered by photo): their renditions gather on the first.
            if let previous = last, previous.id == photo.id {
                last!.renditions += photo.renditions
            } else {
                if let previous = last { photos[previous.userID, default: []].append(previous) }
                last = photo
            }
        }
        if let previous = last { photos[previous.userID, default: []].append(previous) }
        return photos
    }

    /// One photo with its renditions.
    func photo(_ id: String, in database: PostgresClient) async throws -> PhotoRecord? {
        let rows = try await database.query("SELECT \(unescaped: Self.columns) FROM photos WHERE id = \(id)::uuid")
        guard let record = try rows.first.map(Self.decode) else { return nil }
        return try await self.photos(of: [record.userID], in: database)[record.userID]?.first { $0.id == id }
    }

    /// One user's photos in position order (under the profile's lock).
    func photos(of userID: String, in transaction: PostgresTransaction) async throws -> [PhotoRecord] {
        let rows = try await transaction.query(
            "SELECT \(unescaped: Self.columns) FROM photos WHERE user_id = \(userID) ORDER BY position")
        return try rows.map(Self.decode)
    }

    /// The photo a retried upload stored, by the user's upload key.
    func photo(userID: String, uploadKey: String, in runner: some SQLRunner) async throws
        -> (id: String, contentHash: [UInt8])?
    {
        let rows = try await runner.query(
            "SELECT id::text, content_hash FROM photos WHERE user_id = \(userID) AND upload_key = \(uploadKey)")
        return try rows.first.map { try $0.decode((String, [UInt8]).self) }
    }

    /// The user's photo ids in position order (under the profile's lock).
    func ids(userID: String, in transaction: PostgresTransaction) async throws -> [String] {
        let rows = try await transaction.query(
            "SELECT id::text FROM photos WHERE user_id = \(userID) ORDER BY position")
        return try rows.map { try $0.decode(String.self, at: 0) }
    }

    /// Inserts a photo at `position` (0-based, clamped to the end) with its renditions and renumbers the others.
    func insert(_ photo: PhotoRecord, at position: Int, in transaction: PostgresTransaction) async throws {
        var order = try await self.ids(userID: photo.userID, in: transaction)
        order.insert(photo.id, at: min(max(0, position), order.count))
        try await transaction.execute(
            """
            INSERT INTO photos (id, user_id, position, version, content_hash, width, height, upload_key)
            VALUES (\(photo.id)::uuid, \(photo.userID), \(Int32(order.count - 1)), 1, \(photo.contentHash),
                    \(photo.width), \(photo.height), \(photo.uploadKey))
            """)
        for rendition in photo.renditions {
            try await transaction.execute(
                """
                INSERT INTO photo_variants (photo_id, variant, format, width, height, byte_size, blob_key)
                VALUES (\(photo.id)::uuid, \(rendition.variant), \(rendition.format), \(rendition.width),
                        \(rendition.height), \(rendition.byteSize), \(rendition.blobKey))
                """)
        }
        try await self.renumber(userID: photo.userID, order, in: transaction)
    }

    /// Positions 0..n-1 in the given order.
    func renumber(userID: String, _ order: [String], in transaction: PostgresTransaction) async throws {
        try await transaction.execute(
            """
            UPDATE photos SET position = t.position - 1
            FROM unnest(\(order)::uuid[]) WITH ORDINALITY AS t(id, position)
            WHERE photos.id = t.id AND photos.user_id = \(userID)
            """)
    }

    /// Deletes one of the user's photos; returns its blob keys no other rendition references (nil: not theirs).
    func delete(_ id: String, userID: String, in transaction: PostgresTransaction) async throws -> [String]? {
        let keyRows = try await transaction.query(
            """
            SELECT v.blob_key FROM photo_variants v JOIN photos p ON p.id = v.photo_id
            WHERE p.id = \(id)::uuid AND p.user_id = \(userID)
            """)
        let deleted = try await transaction.execute(
            "DELETE FROM photos WHERE id = \(id)::uuid AND user_id = \(userID)")
        guard deleted == 1 else { return nil }
        let order = try await self.ids(userID: userID, in: transaction)
        try await self.renumber(userID: userID, order, in: transaction)
        return try await Self.unreferenced(try keyRows.map { try $0.decode(String.self, at: 0) }, in: transaction)
    }

    /// The keys among `keys` that no rendition row references any more.
    static func unreferenced(_ keys: [String], in transaction: PostgresTransaction) async throws -> [String] {
        guard !keys.isEmpty else { return [] }
        let rows = try await transaction.query(
            "SELECT DISTINCT blob_key FROM photo_variants WHERE blob_key = ANY(\(keys))")
        let referenced = Set(try rows.map { try $0.decode(String.self, at: 0) })
        return Array(Set(keys).subtracting(referenced)).sorted()
    }

    /// The keys of the stored bytes of every rendition of `userID`'s photos (the footprint counts the files).
    static func blobKeys(of userID: String, in database: PostgresClient) async throws -> [String] {
        let rows = try await database.query(
            """
            SELECT DISTINCT v.blob_key FROM photo_variants v JOIN photos p ON p.id = v.photo_id
            WHERE p.user_id = \(userID)
            """)
        return try rows.map { try $0.decode(String.self, at: 0) }
    }
}
