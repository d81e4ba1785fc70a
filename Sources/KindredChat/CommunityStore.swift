import KindredPostgres
import KindredProto

/// The SQL of the community limits chat keeps (table `communities`, from profile's CommunityUpdated).
struct CommunityStore: Sendable {
    /// Stores the community's limit unless a newer version is held.
    func upsert(_ community: Kindred.Common.V1.Community, in transaction: PostgresTransaction) async throws {
        let limit = Int(min(max(community.settings?.hourlyMessageLimit ?? 0, 0), 10_000))
        try await transaction.execute(
            """
            INSERT INTO communities (community_id, hourly_message_limit, version)
            VALUES (\(community.communityId), \(limit), \(community.version))
            ON CONFLICT (community_id) DO UPDATE SET hourly_message_limit = excluded.hourly_message_limit,
                version = excluded.version
            WHERE communities.version < excluded.version
            """
        )
    }
}
