import KindredPostgres
import KindredServiceKit

/// What card visibility asks about the viewer's relations: whom of `others` the viewer blocked or was blocked by,
/// with whom the viewer has a match that has not ended, and with whom one ended. The match service owns them;
/// profile learns them from its UserBlocked / UserUnblocked and MatchCreated / MatchEnded events.
public protocol RelationOracle: Sendable {
    func relations(between viewer: String, and others: [String]) async throws -> PairRelations
}

/// The viewer's relations to a set of other members.
public struct PairRelations: Sendable, Equatable {
    /// Blocked by the viewer.
    public var blocked: Set<String> = []
    /// Blocked the viewer.
    public var blockedBy: Set<String> = []
    /// Matched (the match not ended).
    public var matched: Set<String> = []
    /// A match that ended (unmatched, or ended by a block).
    public var ended: Set<String> = []

    public init(
        blocked: Set<String> = [], blockedBy: Set<String> = [], matched: Set<String> = [], ended: Set<String> = []
    ) {
        self.blocked = blocked
        self.blockedBy = blockedBy
        self.matched = matched
        self.ended = ended
    }

    /// The pair's match as ``MemberRelation/Facts`` takes it (profile does not know the mode: matched stands for
    /// both, which the policy treats alike).
    func match(with other: String) -> MemberRelation.Facts.Match {
        self.matched.contains(other) ? .matched : self.ended.contains(other) ? .ended : .none
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
