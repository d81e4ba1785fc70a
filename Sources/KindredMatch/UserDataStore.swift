import KindredPostgres
import KindredProto

/// Everything match holds about one user: counted (GetUserFootprint) and erased (AccountDeleted).
struct UserDataStore: Sendable {
    /// Kinds in the order GetUserFootprint lists them.
    static let kinds = [
        "swipes_given", "swipes_received", "undos", "matches", "blocks", "reports_filed", "reports_received", "members",
        "activity_broadcasts",
    ]

    func footprint(_ user: String, on database: PostgresClient) async throws -> [(String, Int64)] {
        let row = try await database.query(
            """
            SELECT (SELECT count(*) FROM swipes WHERE swiper = \(user)::uuid),
                   (SELECT count(*) FROM swipes WHERE target = \(user)::uuid),
                   (SELECT count(*) FROM undos WHERE swiper = \(user)::uuid OR target = \(user)::uuid),
                   (SELECT count(*) FROM matches WHERE user_low = \(user)::uuid OR user_high = \(user)::uuid),
                   (SELECT count(*) FROM blocks WHERE blocker = \(user)::uuid OR blocked = \(user)::uuid),
                   (SELECT count(*) FROM reports WHERE reporter = \(user)::uuid),
                   (SELECT count(*) FROM reports WHERE reported = \(user)::uuid),
                   (SELECT count(*) FROM members WHERE user_id = \(user)::uuid),
                   (SELECT count(*) FROM activity_broadcasts WHERE user_id = \(user)::uuid)
            """
        ).first!
        return try Self.kinds.enumerated().map { ($0.element, try row.decode(Int64.self, at: $0.offset)) }
    }

    /// The user's active matches (to announce their end), sorted by the other user (the order their events are
    /// appended in), then every row about the user, both directions.
    func erase(_ user: String, in transaction: PostgresTransaction) async throws -> [(matchID: String, other: String)] {
        let ended = try await transaction.query(
            """
            SELECT match_id::text, CASE WHEN user_low = \(user)::uuid THEN user_high ELSE user_low END::text
            FROM matches WHERE (user_low = \(user)::uuid OR user_high = \(user)::uuid) AND ended_at IS NULL
            ORDER BY 2
            """
        ).map { (matchID: try $0.decode(String.self, at: 0), other: try $0.decode(String.self, at: 1)) }
        _ = try await transaction.pipeline([
            "DELETE FROM swipes WHERE swiper = \(user)::uuid OR target = \(user)::uuid",
            "DELETE FROM undos WHERE swiper = \(user)::uuid OR target = \(user)::uuid",
            "DELETE FROM matches WHERE user_low = \(user)::uuid OR user_high = \(user)::uuid",
            "DELETE FROM blocks WHERE blocker = \(user)::uuid OR blocked = \(user)::uuid",
            "DELETE FROM reports WHERE reporter = \(user)::uuid OR reported = \(user)::uuid",
            "DELETE FROM members WHERE user_id = \(user)::uuid",
            "DELETE FROM activity_broadcasts WHERE user_id = \(user)::uuid",
        ])
        return ended
    }
}
