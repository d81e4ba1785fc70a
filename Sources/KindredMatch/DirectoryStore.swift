import KindredPostgres
import KindredProto

/// The projections match keeps of other services' data, fed by events: `communities` (profile's
/// CommunityUpdated) and `members` (profile's ProfileUpdated; auth's account events). Newer versions win.
struct DirectoryStore: Sendable {
    func upsertCommunity(_ community: Kindred.Common.V1.Community, in transaction: PostgresTransaction) async throws {
        let settings = CommunitySettingsRow(community.settings ?? Kindred.Common.V1.CommunitySettings())
        try await transaction.execute(
            """
            INSERT INTO communities (community_id, mode, daily_like_limit, undo_window_seconds, daily_undo_limit,
                                     activities, version)
            VALUES (\(community.communityId), \(settings.mode.rawValue)::int2, \(settings.dailyLikeLimit),
                    \(settings.undoWindowSeconds), \(settings.dailyUndoLimit), \(settings.activities)::text[],
                    \(community.version))
            ON CONFLICT (community_id) DO UPDATE SET
                mode = EXCLUDED.mode, daily_like_limit = EXCLUDED.daily_like_limit,
                undo_window_seconds = EXCLUDED.undo_window_seconds, daily_undo_limit = EXCLUDED.daily_undo_limit,
                activities = EXCLUDED.activities, version = EXCLUDED.version
            WHERE communities.version < EXCLUDED.version
            """)
    }

    /// A profile snapshot: community and eligibility (ignored when not newer than what is held).
    func upsertMember(_ snapshot: Kindred.Common.V1.CandidateSnapshot, in transaction: PostgresTransaction) async throws {
        try await transaction.execute(
            """
            INSERT INTO members (user_id, community_id, eligible, profile_version)
            VALUES (\(snapshot.userId)::uuid, \(snapshot.communityId), \(snapshot.eligible), \(snapshot.version))
            ON CONFLICT (user_id) DO UPDATE SET
                community_id = EXCLUDED.community_id, eligible = EXCLUDED.eligible,
                profile_version = EXCLUDED.profile_version
            WHERE members.profile_version < EXCLUDED.profile_version
            """)
    }

    /// Deactivation hides the user (nothing ends); reactivation shows them again.
    func setDeactivated(_ deactivated: Bool, user: String, community: String, in transaction: PostgresTransaction)
        async throws
    {
        try await transaction.execute(
            """
            INSERT INTO members (user_id, community_id, deactivated) VALUES (\(user)::uuid, \(community), \(deactivated))
            ON CONFLICT (user_id) DO UPDATE SET deactivated = EXCLUDED.deactivated
            """)
    }

    /// The settings of a community (the defaults until profile announced it).
    func settings(_ community: String, in transaction: PostgresTransaction) async throws -> CommunitySettingsRow {
        guard
            let row = try await transaction.query(
                """
                SELECT mode::int4, daily_like_limit, undo_window_seconds, daily_undo_limit, activities FROM communities
                WHERE community_id = \(community)
                """
            ).first
        else { return .defaults }
        return CommunitySettingsRow(
            mode: MatchMode(rawValue: try row.decode(Int32.self, at: 0)) ?? .mutual,
            dailyLikeLimit: Int(try row.decode(Int32.self, at: 1)),
            undoWindowSeconds: Int(try row.decode(Int32.self, at: 2)),
            dailyUndoLimit: Int(try row.decode(Int32.self, at: 3)),
            activities: try row.decode([String].self, at: 4)
        )
    }

    /// The community `user` is a member of (eligible or not, active or not); nil for an unknown user.
    func community(of user: String, in transaction: PostgresTransaction) async throws -> String? {
        try await transaction.query("SELECT community_id FROM members WHERE user_id = \(user)::uuid")
            .first.map { try $0.decode(String.self, at: 0) }
    }

    /// Whether `user` is visible to members of `community`: a known, eligible, active member of it.
    func isVisible(_ user: String, in community: String, on database: PostgresTransaction) async throws -> Bool {
        try await database.query(
            """
            SELECT EXISTS (SELECT 1 FROM members WHERE user_id = \(user)::uuid AND community_id = \(community)
                           AND eligible AND NOT deactivated)
            """
        ).scalar(Bool.self)
    }
}
