import KindredPostgres
import KindredProto

/// The reads behind an answer about members (GetProfile, a page of cards, a photo's owner): the profiles with
/// their locations, their photos with renditions, the settings of their communities and, for cards, the viewer's
/// relations to them, sent as one pipeline: one round trip and one pooled connection, where one query each took
/// three to five. The statements run in one implicit transaction, each with its own snapshot (READ COMMITTED),
/// as the separate queries did.
struct ProfilePageStore: Sendable {
    /// What one pipeline read.
    struct Page: Sendable {
        /// Profiles found, with their photos, by user id.
        var records: [String: ProfileRecord] = [:]
        /// The settings of the communities of `records`, by community id.
        var settings: [String: Kindred.Common.V1.CommunitySettings] = [:]
        /// The viewer's relations to the others (empty without a viewer).
        var relations = PairRelations()
    }

    /// Reads `userIDs` (and, with a viewer, the viewer's relations to `others`).
    func read(
        _ userIDs: [String],
        relationsOf viewer: String? = nil,
        to others: [String] = [],
        in database: PostgresClient
    ) async throws -> Page {
        var statements: [PostgresQuery] = [
            "SELECT \(unescaped: ProfileStore.columns) FROM \(unescaped: ProfileStore.from) WHERE p.user_id = ANY(\(userIDs))",
            """
            SELECT \(unescaped: PhotoStore.columns),
                   v.variant, v.format, v.width, v.height, v.byte_size, v.blob_key
            FROM photos LEFT JOIN photo_variants v ON v.photo_id = photos.id
            WHERE photos.user_id = ANY(\(userIDs))
            ORDER BY photos.user_id, photos.position, photos.id, v.variant, v.format
            """,
            """
            SELECT \(unescaped: CommunityStore.columns) FROM communities
            WHERE id IN (SELECT community_id FROM profiles WHERE user_id = ANY(\(userIDs)))
            """,
        ]
        if let viewer, !others.isEmpty { statements.append(ProfileStore.relationsQuery(between: viewer, and: others)) }
        let results = try await database.pipeline(statements)

        var photos: [String: [PhotoRecord]] = [:]
        var last: PhotoRecord?
        for row in results[1] {
            var photo = try PhotoStore.decode(row)
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

        var page = Page()
        for row in results[0] {
            var record = try ProfileStore.decode(row)
            record.photos = photos[record.userID] ?? []
            page.records[record.userID] = record
        }
        for row in results[2] {
            let community = try CommunityStore.decode(row)
            page.settings[community.communityId] = community.settings ?? .init()
        }
        if statements.count > 3 { page.relations = try ProfileStore.decodeRelations(results[3]) }
        return page
    }
}
