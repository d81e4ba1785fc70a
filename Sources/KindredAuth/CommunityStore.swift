import KindredPostgres
import KindredProto

/// The SQL of what auth knows about communities (table `communities`, from profile's CommunityUpdated): whether
/// each takes new members. A community auth has not heard of takes them (profile creates every community open).
struct CommunityStore: Sendable {
    /// Stores the community's sign-up state unless a newer version is held.
    func upsert(_ community: Kindred.Common.V1.Community, in transaction: PostgresTransaction) async throws {
        let open = community.settings?.signUpOpen ?? true
        try await transaction.execute(
            """
            INSERT INTO communities (community_id, sign_up_open, version)
            VALUES (\(community.communityId), \(open), \(community.version))
            ON CONFLICT (community_id) DO UPDATE SET sign_up_open = excluded.sign_up_open, version = excluded.version
            WHERE communities.version < excluded.version
            """
        )
    }

    /// Whether `community` takes new members.
    func isOpen(_ community: String, in database: PostgresClient) async throws -> Bool {
        let rows = try await database.query(
            "SELECT sign_up_open FROM communities WHERE community_id = \(community)"
        )
        return try rows.first?.decode(Bool.self, at: 0) ?? true
    }

    /// Whether `community` takes new members, read in `transaction`.
    func isOpen(_ community: String, in transaction: PostgresTransaction) async throws -> Bool {
        let rows = try await transaction.query(
            "SELECT sign_up_open FROM communities WHERE community_id = \(community)"
        )
        return try rows.first?.decode(Bool.self, at: 0) ?? true
    }

    /// Whether the account is still pending in a community that takes no new members.
    func isPendingInClosedCommunity(accountID: String, in transaction: PostgresTransaction) async throws -> Bool {
        let rows = try await transaction.query(
            """
            SELECT a.status = 'pending' AND NOT coalesce(c.sign_up_open, true)
            FROM accounts a LEFT JOIN communities c ON c.community_id = a.community_id WHERE a.id = \(accountID)
            """
        )
        return try rows.first?.decode(Bool.self, at: 0) ?? false
    }
}
