import KindredPostgres
import KindredProto

/// Re-announces a community's members after its rules changed: eligibility (required fields, minimum photos)
/// and the attributes a snapshot carries depend on the community's definitions, and discovery and match keep
/// snapshots. `UpdateCommunity` records a job (`request`); the profile server's background task works through
/// it in batches (`nextBatch`), each in one transaction that bumps every member's version and appends their
/// ProfileUpdated, so a crash resumes after the last committed batch and nothing is announced twice with the
/// same version.
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
}

extension ProfileService {
    /// Re-announces the next batch of the oldest pending community job; returns how many members it announced
    /// (0: no job, or the job just finished).
    func resnapshotNextBatch(limit: Int = CommunityResnapshotStore.batchSize) async throws -> Int {
        try await self.database.withTransaction { transaction in
            guard
                let job = try await transaction.query(
                    """
                    SELECT community_id, after_user_id FROM community_resnapshots
                    ORDER BY requested_at LIMIT 1 FOR UPDATE SKIP LOCKED
                    """
                ).first
            else { return 0 }
            let (community, after) = try job.decode((String, String).self)
            let members = try await transaction.query(
                """
                SELECT user_id FROM profiles WHERE community_id = \(community) AND user_id > \(after)
                ORDER BY user_id LIMIT \(limit) FOR UPDATE
                """
            ).map { try $0.decode(String.self, at: 0) }
            let settings = try await self.settings(of: community, in: transaction)
            for member in members {
                try await transaction.execute(
                    "UPDATE profiles SET version = version + 1, card_version = card_version + 1 WHERE user_id = \(member)")
                let record = try await self.reread(member, in: transaction)
                try await self.appendProfileUpdated(record, settings: settings, changed: ["community"], in: transaction)
            }
            if members.count < limit {
                try await transaction.execute("DELETE FROM community_resnapshots WHERE community_id = \(community)")
            } else {
                try await transaction.execute(
                    "UPDATE community_resnapshots SET after_user_id = \(members.last!) WHERE community_id = \(community)")
            }
            return members.count
        }
    }
}
