import Logging
import Synchronization

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
///
/// Its `BEGIN` travels with its first statement (or pipeline), in one round trip; ``commit(after:)`` sends its last
/// statements with the `COMMIT`, in one more. A transaction that runs no statement sends neither.
public struct PostgresTransaction: Sendable {
    /// The connection the transaction runs on.
    public let connection: PostgresConnection
    /// 1 on the first run, 2 on the first retry, and so on.
    public let attempt: Int
    let progress: Progress
    /// Whose notifier sends the notifications queued for the commit.
    let client: PostgresClient

    init(connection: PostgresConnection, attempt: Int, begin: PostgresQuery, client: PostgresClient) {
        self.connection = connection
        self.attempt = attempt
        self.progress = Progress(begin: begin)
        self.client = client
    }

    /// Queues a notification to the listeners of `channel` for when the transaction commits (at once when it has
    /// committed already, through ``commit(after:)``); a rollback drops it. It is sent after the commit, on the
    /// client's notifying connection (``PostgresClient/queueNotification(channel:payload:)``): a `pg_notify` in the
    /// transaction itself would make its commit wait for every other notifying commit of the server.
    public func queueNotification(channel: String, payload: String = "") {
        if self.progress.queue((channel, payload)) { self.client.queueNotification(channel: channel, payload: payload) }
    }

    /// The transaction committed: its queued notifications go to the notifier, and later ones at once.
    func didCommit() {
        self.client.queueNotifications(self.progress.committed())
    }

    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        guard let begin = try self.progress.takeBegin() else { return try await self.connection.query(query) }
        return try await self.sendingBegin(begin) { try await self.connection.pipeline([begin, query])[1] }
    }

    @discardableResult
    public func execute(_ query: PostgresQuery) async throws -> Int {
        try await self.query(query).affectedRows
    }

    /// Runs `queries` in one round trip (libpq's pipeline mode) and returns their results in order; the first
    /// that fails throws its error and aborts the transaction.
    public func pipeline(_ queries: [PostgresQuery]) async throws -> [PostgresRows] {
        if queries.isEmpty { return [] }
        guard let begin = try self.progress.takeBegin() else { return try await self.connection.pipeline(queries) }
        return try await self.sendingBegin(begin) {
            Array(try await self.connection.pipeline([begin] + queries).dropFirst())
        }
    }

    /// Runs `queries` and commits, in one round trip, and returns their results in order. The transaction has
    /// ended when it returns: later statements throw. A statement that fails throws its error and rolls the
    /// transaction back; a serialization failure or deadlock, in a statement or at `COMMIT`, makes
    /// ``PostgresClient/withTransaction(isolation:readOnly:maxAttempts:callerIsolation:_:)`` run the body again as
    /// usual, and a connection lost on the way leaves the outcome unknown (no retry), as at its own `COMMIT`.
    public func commit(after queries: [PostgresQuery]) async throws -> [PostgresRows] {
        let begin = try self.progress.takeBegin()
        let statements = (begin.map { [$0] } ?? []) + queries + [PostgresQuery(unsafeSQL: "COMMIT")]
        let results: [PostgresRows]
        // Ended either way: committed, rolled back by a failing COMMIT, or aborted (rolled back by the caller's
        // `withTransaction`).
        defer { self.progress.end() }
        do {
            results = try await self.connection.pipeline(statements)
        } catch let error as PostgresError where error.code == .connectionLost {
            throw AmbiguousCommit(error: error)
        }
        if results.last?.commandTag == "ROLLBACK" {
            throw PostgresError(code: .queryFailed, reason: "the transaction was rolled back instead of committed")
        }
        self.didCommit()
        return Array(results.dropFirst(begin == nil ? 0 : 1).dropLast())
    }

    /// Runs `send`, which sends `begin` first; when it throws before the server began the transaction (the task was
    /// cancelled before anything was sent), the next statement sends `begin` again.
    private func sendingBegin<T>(_ begin: PostgresQuery, _ send: () async throws -> T) async throws -> T {
        do {
            return try await send()
        } catch {
            if self.connection.transactionStatus == .idle { self.progress.restore(begin) }
            throw error
        }
    }

    /// Where the transaction is: `BEGIN` not sent yet, begun, or ended by ``commit(after:)``; and the notifications
    /// queued for its commit, until it committed.
    final class Progress: Sendable {
        private enum Phase {
            case notBegun(PostgresQuery)
            case begun
            case ended
        }

        private struct State {
            var phase: Phase
            var notifications: [(channel: String, payload: String)] = []
            var committed = false
        }

        private let current: Mutex<State>

        init(begin: PostgresQuery) {
            self.current = Mutex(State(phase: .notBegun(begin)))
        }

        /// The `BEGIN` to send with the next statement, if it was not sent; throws once the transaction ended.
        func takeBegin() throws(PostgresError) -> PostgresQuery? {
            try self.current.withLock { state throws(PostgresError) in
                switch state.phase {
                case .notBegun(let begin):
                    state.phase = .begun
                    return begin
                case .begun:
                    return nil
                case .ended:
                    throw PostgresError(code: .queryFailed, reason: "the transaction has ended")
                }
            }
        }

        func restore(_ begin: PostgresQuery) {
            self.current.withLock { $0.phase = .notBegun(begin) }
        }

        func end() {
            self.current.withLock { $0.phase = .ended }
        }

        /// Keeps a notification for the commit; true when the transaction committed already (send it now).
        func queue(_ notification: (channel: String, payload: String)) -> Bool {
            self.current.withLock { state in
                if !state.committed { state.notifications.append(notification) }
                return state.committed
            }
        }

        /// Marks the transaction committed and hands over the notifications queued until then.
        func committed() -> [(channel: String, payload: String)] {
            self.current.withLock { state in
                state.committed = true
                defer { state.notifications = [] }
                return state.notifications
            }
        }

        /// Whether a statement was sent (and so a `COMMIT` or `ROLLBACK` is due), and whether it was committed.
        var state: (begun: Bool, ended: Bool) {
            self.current.withLock { state in
                switch state.phase {
                case .notBegun: (false, false)
                case .begun: (true, false)
                case .ended: (true, true)
                }
            }
        }
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
                    try await self.runTransaction(on: connection, begin: begin, attempt: attempt, body)
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

    private func runTransaction<T>(
        on connection: PostgresConnection,
        begin: PostgresQuery,
        attempt: Int,
        _ body: (PostgresTransaction) async throws -> T
    ) async throws -> T {
        let transaction = PostgresTransaction(connection: connection, attempt: attempt, begin: begin, client: self)
        let value: T
        do {
            value = try await body(transaction)
            if connection.transactionStatus == .inError {
                throw PostgresError(
                    code: .queryFailed,
                    reason: "a statement failed inside the transaction, which was rolled back"
                )
            }
        } catch {
            if connection.transactionStatus != .idle { _ = await Self.rollback(connection) }
            throw error
        }
        // Nothing to commit when the body sent no statement, or committed with its last ones.
        let (begun, ended) = transaction.progress.state
        guard begun && !ended else {
            if !begun { transaction.didCommit() }  // nothing to commit: nothing can undo them
            return value
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
        transaction.didCommit()
        return value
    }
}

/// A connection lost during COMMIT: the transaction may or may not have committed, so no retry.
private struct AmbiguousCommit: Error {
    var error: PostgresError
}
