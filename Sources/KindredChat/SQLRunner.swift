import KindredPostgres
import KindredProto
import KindredServiceKit

/// Statements run either on the pool or inside a transaction; the stores take either.
protocol SQLRunner: Sendable {
    func query(_ query: PostgresQuery) async throws -> PostgresRows
    @discardableResult func execute(_ query: PostgresQuery) async throws -> Int
}
extension PostgresClient: SQLRunner {}
extension PostgresTransaction: SQLRunner {}
