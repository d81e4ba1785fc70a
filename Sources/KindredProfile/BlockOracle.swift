import KindredPostgres

/// The hook card visibility asks about blocks: whom of `others` the viewer blocked or was blocked by. The match
/// service owns blocks; profile learns them from its UserBlocked / UserUnblocked events.
public protocol BlockOracle: Sendable {
    func blocked(between viewer: String, and others: [String]) async throws -> Set<String>
}

/// Answers from profile's `blocks` table, which the match service's UserBlocked / UserUnblocked events fill
/// (ProfileService's DeliverEvents).
struct BlockTable: BlockOracle {
    let database: PostgresClient
    let profiles = ProfileStore()

    func blocked(between viewer: String, and others: [String]) async throws -> Set<String> {
        guard !others.isEmpty else { return [] }
        return try await self.profiles.blocked(between: viewer, and: others, in: self.database)
    }
}
