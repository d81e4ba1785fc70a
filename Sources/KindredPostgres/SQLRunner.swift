/// Statements run either on the pool or inside a transaction: a store's function that takes `some SQLRunner` can be
/// called with either (one statement on the pool needs no BEGIN/COMMIT).
public protocol SQLRunner: Sendable {
    func query(_ query: PostgresQuery) async throws -> PostgresRows
    @discardableResult func execute(_ query: PostgresQuery) async throws -> Int
}

extension PostgresClient: SQLRunner {}
extension PostgresTransaction: SQLRunner {}
