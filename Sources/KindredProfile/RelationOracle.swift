import KindredPostgres

/// What card visibility asks about the viewer's relations: whom of `others` the viewer blocked or was blocked by,
/// and with whom the viewer has a match that has not ended. The match service owns both; profile learns them
/// from its UserBlocked / UserUnblocked and MatchCreated / MatchEnded events.
public protocol RelationOracle: Sendable {
    func relations(between viewer: String, and others: [String]) async throws -> PairRelations
}

/// The viewer's relations to a set of other members.
public struct PairRelations: Sendable, Equatable {
    /// Blocked either way.
    public var blocked: Set<String> = []
    /// Matched (the match not ended).
    public var matched: Set<String> = []

    public init(blocked: Set<String> = [], matched: Set<String> = []) {
        self.blocked = blocked
        self.matched = matched
    }
}

/// Answers from profile's `blocks` and `matched_pairs` tables, which match's events fill (ProfileService's
/// DeliverEvents).
struct RelationTables: RelationOracle {
    let database: PostgresClient
    let profiles = ProfileStore()

    func relations(between viewer: String, and others: [String]) async throws -> PairRelations {
        guard !others.isEmpty else { return PairRelations() }
        return try await self.profiles.relations(between: viewer, and: others, in: self.database)
    }
}
