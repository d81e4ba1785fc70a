import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// One libpq connection.
///
/// **Threads.** libpq's calls block (connect, and every statement until its result arrives). They
/// never block the caller's thread: an operation is submitted to a `NIOThreadPool` (the client's,
/// sized so every pooled connection has a thread) and the calling task is suspended until the
/// result is back; pipeline mode and LISTEN use libpq's non-blocking calls and `poll(2)` on such a
/// thread. A pooled connection's pipelines, and its statements prepared already, go another way: the
/// caller sends them with libpq's non-blocking calls and is suspended, and the client's
/// ``PostgresPoller`` reads the results when the socket is readable and resumes it, which saves the
/// hand-off to a pool thread and that thread's sleep and wake-up. Event loops and the Swift
/// cooperative pool are never blocked.
/// Cancelling the calling task sends a cancel request (`PQcancel`) for the running statement.
///
/// One operation at a time: a connection belongs to one task (``PostgresClient/withConnection(isolation:_:)``);
/// concurrent use throws ``PostgresError/Code/connectionBusy``.
///
/// Statements are always parameterised (`PQexecParams`, or `PQprepare` + `PQexecPrepared` through a
/// per-connection cache keyed by SQL text and parameter types), with binary results.
public final class PostgresConnection: @unchecked Sendable {
    // Safety: `pq` and the statement cache are touched only by the one operation that holds the
    // `phase` in `state` (on one thread at a time: a pool thread, or the caller and then the poller), or by the
    // owner when no operation can run.
    let pq: LibpqConnection
    private let canceller: LibpqCanceller?
    let threadPool: NIOThreadPool
    /// Where pipelines and cached prepared statements wait for their results instead of on a pool thread
    /// (``PostgresPoller``); nil: every statement runs on `threadPool`.
    let poller: PostgresPoller?
    let logger: Logger
    private let cacheLimit: Int
    private var statements: [StatementKey: String] = [:]
    private var nextStatementNumber = 0
    /// Single statements and pipelines answered through the poller (tests).
    private(set) var polledStatements = 0
    var polledPipelines = 0
    private let state = Mutex(State())

    /// The server process serving this connection (`pg_backend_pid()`).
    public let backendPID: Int32

    struct State {
        enum Phase { case idle, queued, running }
        var phase = Phase.idle
        var cancelRequested = false
        var closed = false
        var broken = false
        var transactionStatus = TransactionStatus.idle
    }

    /// What the prepared-statement cache tells statements apart by.
    struct StatementKey: Hashable {
        var sql: String
        var types: [UInt32]

        init(_ query: PostgresQuery) {
            self.sql = query.sql
            self.types = query.bindings.parameterTypes
        }
    }

    private init(
        pq: LibpqConnection, configuration: PostgresConfiguration, threadPool: NIOThreadPool, poller: PostgresPoller?,
        logger: Logger
    ) {
        self.pq = pq
        self.canceller = pq.makeCanceller()
        self.threadPool = threadPool
        self.poller = poller
        self.cacheLimit = max(0, configuration.preparedStatementCacheSize)
        self.backendPID = pq.backendPID
        var logger = logger
        logger[metadataKey: "db.backend_pid"] = "\(self.backendPID)"
        self.logger = logger
    }

    /// Opens a connection. `connect_timeout` bounds the wait.
    /// - Parameter threadPool: where libpq's blocking calls run; keep it running while the
    ///   connection is in use.
    public static func connect(
        configuration: PostgresConfiguration,
        threadPool: NIOThreadPool = .singleton,
        logger: Logger
    ) async throws -> PostgresConnection {
        try await self.connect(configuration: configuration, threadPool: threadPool, poller: nil, logger: logger)
    }

    /// Opens a connection whose cached prepared statements wait for their results on `poller`.
    static func connect(
        configuration: PostgresConfiguration,
        threadPool: NIOThreadPool,
        poller: PostgresPoller?,
        logger: Logger
    ) async throws -> PostgresConnection {
        let parameters = configuration.libpqParameters
        let pq = try await runBlocking(on: threadPool) { () throws(PostgresError) in
            try LibpqConnection.connect(parameters: parameters, logger: logger)
        }
        let connection = PostgresConnection(
            pq: pq,
            configuration: configuration,
            threadPool: threadPool,
            poller: poller,
            logger: logger
        )
        connection.logger.debug("postgres connection opened")
        return connection
    }

    /// Runs a statement and returns its rows.
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try query.bindings.validate()
        return try await StatementTracing.traced(query) {
            if let poller = self.poller, let rows = try await self.queryPolled(query, on: poller) { return rows }
            return try await self.run { connection throws(PostgresError) in
                PostgresRows(try connection.executeOnThread(query))
            }
        }
    }

    /// Runs a statement and returns the number of rows it affected.
    @discardableResult
    public func execute(_ query: PostgresQuery) async throws -> Int {
        try await self.query(query).affectedRows
    }

    /// The plan this connection runs for `query`, as `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` shows it, run with
    /// `query`'s values on the statement prepared for it earlier (nil when none is cached): the plan made once per
    /// connection, on the tables as they were then. For tests and benchmarks that check a statement's plan holds as
    /// its tables grow. The statement runs: wrap a write in a transaction and roll it back.
    public func explainPreparedPlan(of query: PostgresQuery) async throws -> PreparedPlan? {
        let name = try await self.run { connection throws(PostgresError) in connection.cachedStatementName(for: query) }
        guard let name else { return nil }
        // EXECUTE inside EXPLAIN takes no bound parameters: the values go as literals, quoted by the server.
        var literals: [String] = []
        if query.bindings.count > 0 {
            let quoted = (1...query.bindings.count).map { "quote_nullable($\($0))" }.joined(separator: ", ")
            let row = try await self.query(PostgresQuery(unsafeSQL: "SELECT " + quoted, bindings: query.bindings))[0]
            literals = try (0..<query.bindings.count).map { try row.decode(String.self, at: $0) }
        }
        let explain = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE \(name)(\(literals.joined(separator: ", ")))"
        return try PreparedPlan(json: try await self.query(PostgresQuery(unsafeSQL: explain)).scalar(String.self))
    }

    /// Whether the connection has been closed or found broken.
    public var isClosed: Bool {
        self.state.withLock { $0.closed || $0.broken }
    }

    /// Closes the connection (at once if idle, else when the running operation ends).
    public func close() {
        let finishNow = self.state.withLock { state -> Bool in
            defer { state.closed = true }
            return !state.closed && state.phase == .idle
        }
        if finishNow {
            // PQfinish only writes a Terminate message to the non-blocking socket and closes it.
            self.pq.finish()
            self.logger.debug("postgres connection closed")
        }
    }

    // MARK: Internal operations

    /// Whether the pool may hand the connection out again: open and outside any transaction.
    var isReusable: Bool {
        self.state.withLock { !$0.closed && !$0.broken && $0.transactionStatus == .idle }
    }

    var transactionStatus: TransactionStatus {
        self.state.withLock { $0.transactionStatus }
    }

    enum IdleState { case alive, dead, unexpectedInput }

    /// A check without a round trip for an idle connection. A terminated backend sends a FATAL
    /// message and closes the socket: a zero-timeout poll sees that, `PQconsumeInput` reads it, and
    /// reading the end of the stream marks the connection bad. Any input on an idle connection is
    /// unexpected (pool connections do not LISTEN), so the caller confirms with a round trip.
    func checkWhileIdle() -> IdleState {
        let claimed = self.state.withLock { state -> Bool in
            guard state.phase == .idle, !state.closed, !state.broken else { return false }
            state.phase = .running
            return true
        }
        guard claimed else { return .dead }
        var result = IdleState.alive
        if self.pq.isBad {
            result = .dead
        } else if self.pq.waitReadable(timeoutMilliseconds: 0) {
            result = .unexpectedInput
            // Neither call blocks (libpq's socket is non-blocking); the second read finds the EOF.
            for _ in 0..<3 where self.pq.waitReadable(timeoutMilliseconds: 0) {
                if !self.pq.consumeInput() { break }
            }
            _ = self.pq.takeNotifications()
            if self.pq.isBad { result = .dead }
        }
        self.state.withLock { state in
            state.phase = .idle
            if result == .dead { state.broken = true }
        }
        return result
    }

    /// Runs SQL text with the simple query protocol (several statements allowed). Only for SQL that
    /// comes from the repository (migration files), never with user data.
    func executeScript(_ sql: String) async throws {
        try await self.run { connection throws(PostgresError) in
            _ = try connection.checked(connection.pq.exec(sql))
        }
    }

    /// `PQescapeIdentifier`.
    func escapeIdentifier(_ identifier: String) async throws -> String {
        try await self.run { connection throws(PostgresError) in
            guard let escaped = connection.pq.escapeIdentifier(identifier) else {
                throw PostgresError(code: .invalidParameter, reason: "the identifier cannot be escaped")
            }
            return escaped
        }
    }

    /// Waits up to `timeoutMilliseconds` for notifications (LISTEN) and returns those that arrived.
    func waitForNotifications(timeoutMilliseconds: Int32) async throws -> [PostgresNotification] {
        try await self.run(cancellable: false) { connection throws(PostgresError) in
            let pq = connection.pq
            var notifications = pq.takeNotifications()
            if notifications.isEmpty && pq.waitReadable(timeoutMilliseconds: timeoutMilliseconds) {
                guard pq.consumeInput() else {
                    throw PostgresError(
                        code: .connectionLost,
                        reason: "the listening connection was lost",
                        serverMessage: pq.errorMessage
                    )
                }
                notifications = pq.takeNotifications()
            }
            if pq.isBad {
                throw PostgresError(code: .connectionLost, reason: "the listening connection was lost")
            }
            return notifications
        }
    }

    /// Runs `body` on a thread-pool thread with exclusive use of the connection.
    /// - Parameter cancellable: whether task cancellation cancels the operation (cleanup such as
    ///   ROLLBACK runs even in a cancelled task).
    func run<T: Sendable>(
        cancellable: Bool = true,
        _ body: @escaping @Sendable (PostgresConnection) throws(PostgresError) -> T
    ) async throws -> T {
        if cancellable && Task.isCancelled {
            throw PostgresError(code: .cancelled, reason: "the task was cancelled")
        }
        try self.claim(as: .queued)
        let operation = { () async throws -> T in
            try await Self.runBlocking(on: self.threadPool) { () throws(PostgresError) -> T in
                try self.state.withLock { state throws(PostgresError) in
                    if state.cancelRequested {
                        state.phase = .idle
                        throw PostgresError(code: .cancelled, reason: "the task was cancelled")
                    }
                    state.phase = .running
                }
                let result = Result { () throws(PostgresError) in try body(self) }
                self.endOperation()
                return try result.get()
            } onShutdown: {
                self.state.withLock { $0.phase = .idle }
            }
        }
        if cancellable {
            return try await withTaskCancellationHandler(operation: operation) { self.requestCancel() }
        } else {
            return try await operation()
        }
    }

    /// A statement this connection has prepared already, sent from the caller's thread (libpq non-blocking), its
    /// result read by `poller` when the socket is readable: no hand-off to a pool thread before the round trip, one
    /// wake-up after it. nil when the statement is not prepared here yet, or prepared no longer ("cached plan must
    /// not change result type" outside a transaction): `run` prepares it on the thread pool.
    private func queryPolled(_ query: PostgresQuery, on poller: PostgresPoller) async throws -> PostgresRows? {
        if Task.isCancelled { throw PostgresError(code: .cancelled, reason: "the task was cancelled") }
        try self.claim(as: .running)
        let key = StatementKey(query)
        guard self.cacheLimit > 0, let name = self.statements[key] else {
            self.state.withLock { $0.phase = .idle }
            return nil
        }
        self.polledStatements += 1
        let result = await self.sendAndAwait(name: name, query.bindings, on: poller)
        // Blocking again for the thread pool's calls (they would block anyway; a pipeline sets its own mode).
        _ = self.pq.setNonBlocking(false)
        self.endOperation()
        if case .success(let result) = result, result.status == .fatalError, result.errorFields.sqlState == "0A000" {
            // A table changed under the statement: prepare it again, as `executeOnThread` does.
            self.statements[key] = nil
            if self.transactionStatus == .idle { return nil }
        }
        return PostgresRows(try self.checked(try result.get()))
    }

    /// Sends the prepared statement `name` and waits on `poller` for its one result.
    private func sendAndAwait(name: String, _ bindings: PostgresBindings, on poller: PostgresPoller) async
        -> Result<LibpqResult, PostgresError>
    {
        let pq = self.pq
        guard pq.setNonBlocking(true), pq.sendQueryPrepared(name: name, bindings) else {
            return .failure(pq.lostOrFailed("could not send the statement"))
        }
        return await self.awaitPolled(PolledResult(pq: pq), on: poller)
    }

    /// Takes `operation`'s first step on the caller's thread and, while it waits for the socket, the next ones on
    /// `poller`'s thread; resumes with its outcome. The caller holds the connection (`phase` running) throughout;
    /// cancelling its task cancels the statement running (the server answers it with an error).
    func awaitPolled<Operation: PolledOperation>(_ operation: Operation, on poller: PostgresPoller) async
        -> Result<Operation.Output, PostgresError>
    {
        await withTaskCancellationHandler {
            await self.stepPolled(operation, on: poller)
        } onCancel: {
            self.requestCancel()
        }
    }

    private func stepPolled<Operation: PolledOperation>(_ operation: Operation, on poller: PostgresPoller) async
        -> Result<Operation.Output, PostgresError>
    {
        let writable: Bool
        switch operation.step(readable: false) {
        case .finished(let outcome): return outcome
        case .waiting(let pendingOutput): writable = pendingOutput
        }
        typealias Outcome = Result<Operation.Output, PostgresError>
        return await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
            let waiter = PostgresPoller.Waiter(
                step: { readable in
                    switch operation.step(readable: readable) {
                    case .waiting(let writable): return .wait(writable: writable)
                    case .finished(let outcome): return .finished { continuation.resume(returning: outcome) }
                    }
                },
                abandon: {
                    continuation.resume(
                        returning: .failure(PostgresError(code: .connectionLost, reason: "the connection's wait was given up")))
                })
            if !poller.watch(self.pq.socket, writable: writable, waiter) {
                continuation.resume(
                    returning: .failure(PostgresError(code: .connectionLost, reason: "the connection cannot be watched")))
            }
        }
    }

    /// Takes the connection for one operation (`phase`: queued for the thread pool, running when it starts at once);
    /// throws when it is closed or another task holds it.
    func claim(as phase: State.Phase) throws(PostgresError) {
        try self.state.withLock { state throws(PostgresError) in
            if state.closed || state.broken {
                throw PostgresError(code: .connectionLost, reason: "the connection is closed")
            }
            guard state.phase == .idle else {
                throw PostgresError(code: .connectionBusy, reason: "the connection is used by another task")
            }
            state.phase = phase
            state.cancelRequested = false
        }
    }

    /// When an operation's body ends (`run`'s or a polled statement's): the connection idle again, its transaction
    /// status and health noted, and closed if ``close()`` came meanwhile.
    func endOperation() {
        let (transactionStatus, bad) = (self.pq.transactionStatus, self.pq.isBad)
        let finish = self.state.withLock { state -> Bool in
            state.phase = .idle
            state.transactionStatus = transactionStatus
            state.broken = state.broken || bad
            return state.closed
        }
        if finish { self.pq.finish() }
    }

    /// Cancels the running statement (the server answers it with SQLSTATE 57014).
    private func requestCancel() {
        let send = self.state.withLock { state -> Bool in
            switch state.phase {
            case .idle:
                return false
            case .queued:
                state.cancelRequested = true
                return false
            case .running:
                defer { state.cancelRequested = true }
                return !state.cancelRequested
            }
        }
        guard send, let canceller = self.canceller else { return }
        // PQcancel opens a connection to the server: never on the cancelling (maybe event-loop) thread.
        self.threadPool.submit { state in
            if case .active = state { canceller.cancelRunningQuery() }
        }
    }

    var cancelWasRequested: Bool {
        self.state.withLock { $0.cancelRequested }
    }

    /// Runs `body` on `threadPool`; the continuation is resumed from the pool thread.
    static func runBlocking<T: Sendable>(
        on threadPool: NIOThreadPool,
        _ body: @escaping @Sendable () throws(PostgresError) -> T,
        onShutdown: @escaping @Sendable () -> Void = {}
    ) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
            threadPool.submit { state in
                switch state {
                case .active:
                    continuation.resume(with: Result { () throws(PostgresError) in try body() })
                case .cancelled:
                    onShutdown()
                    continuation.resume(
                        throwing: PostgresError(
                            code: .poolShutdown,
                            reason: "the blocking-call thread pool is shut down"
                        )
                    )
                }
            }
        }
    }

    // MARK: On the thread-pool thread

    /// Executes one statement, through the prepared-statement cache when it is enabled.
    func executeOnThread(_ query: PostgresQuery) throws(PostgresError) -> LibpqResult {
        guard self.cacheLimit > 0 else {
            return try self.checked(self.pq.execParams(query.sql, query.bindings))
        }
        let key = StatementKey(query)
        if let name = self.statements[key] {
            let result = self.pq.execPrepared(name: name, query.bindings)
            // "cached plan must not change result type": a table changed under the statement.
            if let result, result.status == .fatalError, result.errorFields.sqlState == "0A000" {
                self.statements[key] = nil
                if self.pq.transactionStatus == .idle {
                    return try self.executeOnThread(query)
                }
            }
            return try self.checked(result)
        }
        if self.statements.count >= self.cacheLimit {
            // Dynamic SQL filled the cache: start over rather than track recency for every call.
            guard self.pq.transactionStatus == .idle else {
                return try self.checked(self.pq.execParams(query.sql, query.bindings))
            }
            _ = try self.checked(self.pq.exec("DEALLOCATE ALL"))
            self.statements.removeAll()
        }
        self.nextStatementNumber += 1
        let name = "kindred_\(self.nextStatementNumber)"
        _ = try self.checked(self.pq.prepare(name: name, sql: query.sql, types: key.types))
        self.statements[key] = name
        return try self.checked(self.pq.execPrepared(name: name, query.bindings))
    }

    /// The name of the cached prepared statement for `query`, if there is one.
    func cachedStatementName(for query: PostgresQuery) -> String? {
        self.statements[StatementKey(query)]
    }

    /// A new statement name for `query`, to prepare inside a pipeline and cache with ``cachePrepared(_:)`` once its
    /// preparation succeeded; nil when the cache is off or full (a pipeline cannot empty it: the statements it
    /// holds may be queued already).
    func statementToPrepare(for query: PostgresQuery) -> PreparedStatement? {
        guard self.cacheLimit > 0, self.statements.count < self.cacheLimit else { return nil }
        self.nextStatementNumber += 1
        return PreparedStatement(key: StatementKey(query), name: "kindred_\(self.nextStatementNumber)")
    }

    /// Caches a statement prepared in a pipeline.
    func cachePrepared(_ statement: PreparedStatement) {
        self.statements[statement.key] = statement.name
    }

    /// A statement prepared under `name`.
    struct PreparedStatement {
        var key: StatementKey
        var name: String
    }

    /// Turns a statement's result into rows or a ``PostgresError``.
    func checked(_ result: LibpqResult?) throws(PostgresError) -> LibpqResult {
        guard let result else {
            // libpq returns no result when it cannot send the query or allocate memory.
            throw PostgresError(
                code: self.pq.isBad ? .connectionLost : .queryFailed,
                reason: self.pq.isBad ? "the connection to the server was lost" : "libpq returned no result",
                serverMessage: self.pq.errorMessage
            )
        }
        switch result.status {
        case .tuplesOK, .commandOK, .emptyQuery:
            return result
        case .fatalError:
            throw PostgresError(
                server: result.errorFields,
                connectionBroken: self.pq.isBad,
                cancelRequested: self.cancelWasRequested
            )
        case .copy:
            // The connection is now in COPY mode, which this layer does not drive: drop it.
            self.pq.finish()
            throw PostgresError(code: .queryFailed, reason: "COPY is not supported")
        case .pipelineSync, .pipelineAborted, .other:
            throw PostgresError(code: .queryFailed, reason: "unexpected result status")
        }
    }
}

/// One statement's result read as it arrives: flushes what libpq could not send at once, takes input when the
/// socket is readable, and keeps the statement's result until libpq says it has no more (a NULL result). Used by one
/// operation, on the caller's thread first and then on the poller's, never on two at once.
private final class PolledResult: PolledOperation, @unchecked Sendable {
    let pq: LibpqConnection
    private var pendingOutput = true
    var result: LibpqResult?

    init(pq: LibpqConnection) {
        self.pq = pq
    }

    func step(readable: Bool) -> PolledStep<LibpqResult> {
        if self.pendingOutput {
            switch self.pq.flush() {
            case .done: self.pendingOutput = false
            case .pending: break
            case .failed: return .finished(.failure(self.pq.lostOrFailed("could not send the statement")))
            }
        }
        if readable, !self.pq.consumeInput() {
            return .finished(.failure(self.pq.lostOrFailed("the connection to the server was lost")))
        }
        while !self.pq.isBusy {
            guard let next = self.pq.getResult() else {
                guard let result = self.result else {
                    return .finished(.failure(self.pq.lostOrFailed("libpq returned no result")))
                }
                return .finished(.success(result))
            }
            // A statement's results: one, then NULL (an error is the one).
            if self.result == nil { self.result = next }
        }
        return .waiting(writable: self.pendingOutput)
    }
}

/// A statement's plan as ``PostgresConnection/explainPreparedPlan(of:)`` ran it: the whole EXPLAIN (JSON) and, from
/// its top node, the rows it returned and the shared buffers it touched (hit and read).
public struct PreparedPlan: Sendable {
    public var json: String
    public var actualRows: Int
    public var buffers: Int

    init(json: String) throws {
        let root = (try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])?.first?["Plan"]
            as? [String: Any]
        guard let root, let rows = root["Actual Rows"] as? Int, let hit = root["Shared Hit Blocks"] as? Int else {
            throw PostgresError(code: .queryFailed, reason: "the EXPLAIN output has no plan with rows and buffers")
        }
        self.json = json
        self.actualRows = rows
        self.buffers = hit + (root["Shared Read Blocks"] as? Int ?? 0)
    }
}

/// A notification received by LISTEN.
public struct PostgresNotification: Sendable, Hashable {
    public var channel: String
    public var payload: String
    /// The server process of the session that sent it.
    public var backendPID: Int32

    public init(channel: String, payload: String, backendPID: Int32) {
        self.channel = channel
        self.payload = payload
        self.backendPID = backendPID
    }
}
