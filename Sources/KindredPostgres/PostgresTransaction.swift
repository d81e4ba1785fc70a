import Logging

/// The transaction isolation level for ``PostgresClient/withTransaction(isolation:readOnly:maxAttempts:callerIsolation:_:)``.
public enum PostgresIsolationLevel: Sendable, Hashable {
    case readCommitted
    case repeatableRead
    case serializable

    var sql: String {
        switch self {
        case .readCommitted: "READ COMMITTED"
        case .repeatableRead: "REPEATABLE READ"
        case .serializable: "SERIALIZABLE"
        }
    }
}

/// A transaction in progress: run statements through it.
public struct PostgresTransaction: Sendable {
    /// The connection the transaction runs on.
    public let connection: PostgresConnection
    /// 1 on the first run, 2 on the first retry, and so on.
    public let attempt: Int

    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await self.connection.query(query)
    }

    @discardableResult
    public func execute(_ query: PostgresQuery) async throws -> Int {
        try await self.connection.execute(query)
    }

    public func pipeline(_ queries: [PostgresQuery]) async throws -> [PostgresRows] {
        try await self.connection.pipeline(queries)
    }
}

extension PostgresClient {
    /// Runs `body` in a transaction: `BEGIN ISOLATION LEVEL …`, then `COMMIT` when it returns or
    /// `ROLLBACK` when it throws.
    ///
    /// A serialization failure (40001) or deadlock (40P01) — in `body` or at COMMIT — rolls back
    /// and runs `body` again after a short jittered pause, up to `maxAttempts` runs in all; so does
    /// a connection lost before COMMIT was sent (the server rolled the transaction back), on a new
    /// connection. `body` must therefore have no effects outside the database, or tolerate running
    /// again. A connection lost during COMMIT throws ``PostgresError/Code/connectionLost``: the
    /// outcome is unknown. If `body` swallowed a statement's error, the aborted transaction is
    /// rolled back and ``PostgresError/Code/queryFailed`` thrown rather than pretending to commit.
    @discardableResult
    public func withTransaction<T>(
        isolation level: PostgresIsolationLevel = .readCommitted,
        readOnly: Bool = false,
        maxAttempts: Int = 3,
        callerIsolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresTransaction) async throws -> T
    ) async throws -> T {
        precondition(maxAttempts >= 1, "maxAttempts must be at least 1")
        let begin = PostgresQuery(
            unsafeSQL: "BEGIN ISOLATION LEVEL \(level.sql)\(readOnly ? " READ ONLY" : "")"
        )
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await self.withConnection { connection in
                    try await Self.runTransaction(on: connection, begin: begin, attempt: attempt, body)
                }
            } catch let error as PostgresError
                where attempt < maxAttempts && (error.isTransactionConflict || error.code == .connectionLost)
            {
                self.logger.debug(
                    "postgres transaction retried",
                    metadata: ["db.attempt": "\(attempt)", "db.sqlstate": "\(error.sqlState ?? "-")"]
                )
                // 1–10 ms times the attempt number, jittered so that the conflicting transactions
                // do not meet again at the same instant.
                try await Task.sleep(for: .microseconds(Int.random(in: 1_000...10_000) * attempt))
            } catch let error as AmbiguousCommit {
                throw error.error
            }
        }
    }

    private static func runTransaction<T>(
        on connection: PostgresConnection,
        begin: PostgresQuery,
        attempt: Int,
        _ body: (PostgresTransaction) async throws -> T
    ) async throws -> T {
        try await connection.execute(begin)
        let value: T
        do {
            value = try await body(PostgresTransaction(connection: connection, attempt: attempt))
            if connection.transactionStatus == .inError {
                throw PostgresError(
                    code: .queryFailed,
                    reason: "a statement failed inside the transaction, which was rolled back"
                )
            }
        } catch {
            _ = await Self.rollback(connection)
            throw error
        }
        let commit: PostgresRows
        do {
            commit = try await connection.run(cancellable: false) { connection throws(PostgresError) in
                PostgresRows(try connection.checked(connection.pq.exec("COMMIT")))
            }
        } catch let error as PostgresError where error.code == .connectionLost {
            throw AmbiguousCommit(error: error)
        }
        if commit.commandTag == "ROLLBACK" {
            throw PostgresError(code: .queryFailed, reason: "the transaction was rolled back instead of committed")
        }
        return value
    }
}

/// A connection lost during COMMIT: the transaction may or may not have committed, so no retry.
private struct AmbiguousCommit: Error {
    var error: PostgresError
}
