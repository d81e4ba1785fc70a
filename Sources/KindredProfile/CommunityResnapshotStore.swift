import KindredPostgres

/// The re-announcement of a community's members after its rules changed: eligibility (required fields, minimum
/// photos) and the attributes a snapshot carries depend on the community's definitions, and discovery and match
/// keep snapshots. `UpdateCommunity` records a job (`request`); the profile server's background task works
/// through it in batches (``ProfileService/resnapshotNextBatch(limit:)``), each in one transaction that bumps
/// every member's version and appends their ProfileUpdated, so a crash resumes after the last committed batch and
/// nothing is announced twice with the same version.
struct CommunityResnapshotStore: Sendable {
    /// Members per transaction.
    static let batchSize = 200

    /// Records (or restarts) the re-announcement of `communityID`, in the update's transaction.
    static func request(_ communityID: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute(
            """
            INSERT INTO community_resnapshots (community_id) VALUES (\(communityID))
            ON CONFLICT (community_id) DO UPDATE SET after_user_id = '', requested_at = now()
            """)
    }

    /// The oldest pending job, locked until the transaction ends (a job another replica works on is skipped):
    /// its community and the last member already announced ('' at the start).
    static func nextJob(in transaction: PostgresTransaction) async throws -> (communityID: String, after: String)? {
        try await transaction.query(
            """
            SELECT community_id, after_user_id FROM community_resnapshots
            ORDER BY requested_at LIMIT 1 FOR UPDATE SKIP LOCKED
            """
        ).first.map { try $0.decode((String, String).self) }
    }

    /// Up to `limit` members of `communityID` after `after` in id order, their profiles locked.
    static func members(
        of communityID: String, after: String, limit: Int, in transaction: PostgresTransaction
    ) async throws -> [String] {
        try await transaction.query(
            """
            SELECT user_id FROM profiles WHERE community_id = \(communityID) AND user_id > \(after)
            ORDER BY user_id LIMIT \(limit) FOR UPDATE
            """
        ).map { try $0.decode(String.self, at: 0) }
    }

    /// A new version of a member's profile and card, whose snapshot the community's new rules change (not the
    /// member's own update: `updated_at` stays).
    static func bumpVersions(of userID: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute(
            "UPDATE profiles SET version = version + 1, card_version = card_version + 1 WHERE user_id = \(userID)")
    }

    /// Ends the job of `communityID`.
    static func finish(_ communityID: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute("DELETE FROM community_resnapshots WHERE community_id = \(communityID)")
    }

    /// Records that the job of `communityID` announced every member up to `userID`.
    static func advance(_ communityID: String, to userID: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute(
            "UPDATE community_resnapshots SET after_user_id = \(userID) WHERE community_id = \(communityID)")
    }
}
