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
            PhotoStore.photosQuery(of: userIDs),
            """
            SELECT \(unescaped: CommunityStore.columns) FROM communities
            WHERE id IN (SELECT community_id FROM profiles WHERE user_id = ANY(\(userIDs)))
            """,
        ]
        if let viewer, !others.isEmpty { statements.append(ProfileStore.relationsQuery(between: viewer, and: others)) }
        let results = try await database.pipeline(statements)

        let photos = try PhotoStore.decodePhotos(results[1])

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
