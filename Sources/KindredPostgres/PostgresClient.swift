import Logging
import NIOPosix
import Synchronization

/// A pool of PostgreSQL connections, the way services talk to their database.
///
/// ```swift
/// let client = PostgresClient(configuration: try PostgresConfiguration(url), logger: logger)
/// let name = try await client.query("SELECT name FROM profiles WHERE user_id = \(id)").scalar(String.self)
/// try await client.withTransaction(isolation: .serializable) { tx in
///     try await tx.execute("UPDATE …")
/// }
/// await client.shutdown()
/// ```
///
/// Connections open lazily up to ``PoolConfiguration/maxConnections``; a caller waits at most
/// ``PoolConfiguration/acquireTimeout`` for one (then ``PostgresError/Code/poolTimeout``). Before a
/// connection is handed out it is checked without a round trip (a closed socket or a FATAL message
/// from a terminated backend shows up), and with `SELECT 1` when it sat idle longer than
/// ``PoolConfiguration/healthCheckAfterIdle``. Broken connections are closed and replaced.
///
/// The client owns a `NIOThreadPool` for libpq's blocking calls (see ``PostgresConnection``) with a
/// thread per pooled connection plus two for cancel requests; each LISTEN stream has its own thread, and so has
/// the notifier's connection (``queueNotification(channel:payload:)``, opened with the first notification).
/// Call ``shutdown()`` before dropping the client.
public final class PostgresClient: Sendable {
    public struct PoolConfiguration: Sendable {
        /// At most this many connections are open (LISTEN connections not counted). Default 10.
        public var maxConnections: Int = 10
        /// How long a caller waits for a free connection. Default 5 s.
        public var acquireTimeout: Duration = .seconds(5)
        /// A connection idle for longer is checked with `SELECT 1` before use. Default 30 s.
        public var healthCheckAfterIdle: Duration = .seconds(30)
        /// Idle connections older than this are closed (nil: never). Default 5 min.
        public var idleTimeout: Duration? = .seconds(300)

        public init() {}
    }

    public let configuration: PostgresConfiguration
    public let poolConfiguration: PoolConfiguration
    private let threadPool: NIOThreadPool
    /// Where pooled connections' prepared statements wait for their results (nil without epoll).
    private let poller: PostgresPoller?
    let logger: Logger
    private let state: Mutex<PoolStateMachine<PostgresConnection>>
    private let listeners = Mutex(Listeners())
    private let notifier: PostgresNotifier

    private struct Listeners {
        var tasks: [Int: Task<Void, Never>] = [:]
        var nextID = 0
        var closed = false
    }

    /// Whether ``shutdown()`` has stopped the thread pool.
    private let threadPoolStopped = Mutex(false)

    public convenience init(
        configuration: PostgresConfiguration, pool: PoolConfiguration = PoolConfiguration(), logger: Logger
    ) {
        self.init(configuration: configuration, pool: pool, logger: logger, usesPoller: true)
    }

    /// - Parameter usesPoller: false: every statement waits on the thread pool (tests of that path).
    init(configuration: PostgresConfiguration, pool: PoolConfiguration, logger: Logger, usesPoller: Bool) {
        self.configuration = configuration
        self.poolConfiguration = pool
        self.logger = logger
        self.state = Mutex(PoolStateMachine(maxConnections: pool.maxConnections, idleTimeout: pool.idleTimeout))
        self.threadPool = NIOThreadPool(numberOfThreads: pool.maxConnections + 2)
        self.threadPool.start()
        self.poller = usesPoller ? PostgresPoller() : nil
        self.notifier = PostgresNotifier(configuration: configuration, logger: logger)
    }

    deinit {
        // Dropped without shutdown(): connections close with their objects; stop the threads too.
        self.notifier.stop()
        self.poller?.stop()
        if !self.threadPoolStopped.withLock({ $0 }) {
            self.threadPool.shutdownGracefully { _ in }
        }
    }

    /// Lends a connection to `body` and takes it back afterwards. A connection left inside a
    /// transaction is rolled back; a broken one is closed and replaced.
    @discardableResult
    public func withConnection<T>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        let connection = try await self.leaseConnection()
        let value: T
        do {
            value = try await body(connection)
        } catch {
            await self.release(connection)
            throw error
        }
        await self.release(connection)
        return value
    }

    /// Runs one statement on a pooled connection.
    public func query(_ query: PostgresQuery) async throws -> PostgresRows {
        try await self.withConnection { try await $0.query(query) }
    }

    /// Runs one statement and returns the number of rows it affected.
    @discardableResult
    public func execute(_ query: PostgresQuery) async throws -> Int {
        try await self.withConnection { try await $0.execute(query) }
    }

    /// Runs statements in one pipeline (one round trip, one implicit transaction), see
    /// ``PostgresConnection/pipeline(_:)``.
    public func pipeline(_ queries: [PostgresQuery]) async throws -> [PostgresRows] {
        try await self.withConnection { try await $0.pipeline(queries) }
    }

    /// Sends a notification (`pg_notify`) to the listeners of `channel`, as a durable commit of its own. To tell
    /// listeners of something committed, ``queueNotification(channel:payload:)`` is cheaper.
    public func notify(channel: String, payload: String) async throws {
        try await self.execute("SELECT pg_notify(\(channel), \(payload))")
    }

    /// Queues a notification to the listeners of `channel` about something already committed, and returns at once:
    /// it is sent on a connection of its own, after those queued before it, without waiting for durability. A NOTIFY
    /// inside a writing transaction would make its commit wait for every other notifying commit of the server
    /// (``PostgresNotifier`` says why); ``PostgresTransaction/queueNotification(channel:payload:)`` queues one when
    /// a transaction commits.
    public func queueNotification(channel: String, payload: String = "") {
        self.notifier.send(CollectionOfOne((channel, payload)))
    }

    func queueNotifications(_ notifications: [(channel: String, payload: String)]) {
        self.notifier.send(notifications)
    }

    /// The pool's current counters.
    public var statistics: PostgresPoolStatistics {
        var statistics = self.state.withLock { $0.statistics }
        (statistics.notificationsQueued, statistics.notificationsSent, statistics.notificationsDropped) =
            self.notifier.counts
        return statistics
    }

    /// Closes idle connections, fails waiting callers, waits for lent connections to come back and
    /// closes them, ends LISTEN streams, and stops the thread pool.
    public func shutdown() async {
        let listenerTasks = self.listeners.withLock { listeners in
            listeners.closed = true
            return Array(listeners.tasks.values)
        }
        for task in listenerTasks { task.cancel() }
        for task in listenerTasks { await task.value }
        await self.notifier.shutdown()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            self.perform(self.state.withLock { $0.shutdown(continuation) })
        }
        let stopThreads = self.threadPoolStopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        if stopThreads {
            self.poller?.stop()
            try? await self.threadPool.shutdownGracefully()
        }
    }

    // MARK: Leasing

    func leaseConnection() async throws -> PostgresConnection {
        while true {
            switch try await self.acquireLease() {
            case .connection(let connection, let idleSince):
                if await self.isHealthy(connection, idleSince: idleSince) {
                    return connection
                }
                self.logger.debug("postgres connection found broken; replacing it")
                self.perform(self.state.withLock { $0.release(connection, reusable: false, now: .now) })
            case .openSlot:
                do {
                    let connection = try await PostgresConnection.connect(
                        configuration: self.configuration,
                        threadPool: self.threadPool,
                        poller: self.poller,
                        logger: self.logger
                    )
                    self.state.withLock { $0.opened() }
                    return connection
                } catch {
                    self.perform(self.state.withLock { $0.openFailed() })
                    throw error
                }
            }
        }
    }

    private func acquireLease() async throws -> PoolStateMachine<PostgresConnection>.Lease {
        let id = self.state.withLock { $0.makeID() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<PoolStateMachine<PostgresConnection>.Lease, any Error>) in
                if Task.isCancelled {
                    continuation.resume(throwing: PostgresError(code: .cancelled, reason: "the task was cancelled"))
                    return
                }
                switch self.state.withLock({ $0.acquire(id: id, continuation: continuation) }) {
                case .lease(let lease):
                    continuation.resume(returning: lease)
                case .failed(let error):
                    continuation.resume(throwing: error)
                case .waiting:
                    let timeout = self.poolConfiguration.acquireTimeout
                    let timer = Task {
                        do {
                            try await Task.sleep(for: timeout)
                        } catch {
                            return  // the waiter was served
                        }
                        let error = PostgresError(code: .poolTimeout, reason: "no connection became free in time")
                        self.perform(self.state.withLock { $0.removeWaiter(id: id, error: error) })
                    }
                    self.state.withLock { $0.setTimer(timer, forWaiter: id) }?.cancel()
                }
            }
        } onCancel: {
            let error = PostgresError(code: .cancelled, reason: "the task was cancelled")
            self.perform(self.state.withLock { $0.removeWaiter(id: id, error: error) })
        }
    }

    private func isHealthy(_ connection: PostgresConnection, idleSince: ContinuousClock.Instant) async -> Bool {
        switch connection.checkWhileIdle() {
        case .dead:
            return false
        case .alive:
            guard idleSince.duration(to: .now) > self.poolConfiguration.healthCheckAfterIdle else { return true }
        case .unexpectedInput:
            break
        }
        do {
            try await connection.run(cancellable: false) { connection throws(PostgresError) in
                _ = try connection.executeOnThread("SELECT 1")
            }
            return true
        } catch {
            return false
        }
    }

    func release(_ connection: PostgresConnection) async {
        var reusable = connection.isReusable
        if !reusable && !connection.isClosed {
            switch connection.transactionStatus {
            case .inTransaction, .inError:
                // Left inside a transaction (the body threw between BEGIN and COMMIT): roll back.
                reusable = await Self.rollback(connection)
            case .idle, .active, .unknown:
                break
            }
        }
        let actions = self.state.withLock { $0.release(connection, reusable: reusable, now: .now) }
        self.perform(actions)
    }

    /// Rolls back the open transaction even in a cancelled task.
    /// - Returns: whether the connection is reusable afterwards.
    static func rollback(_ connection: PostgresConnection) async -> Bool {
        do {
            try await connection.run(cancellable: false) { connection throws(PostgresError) in
                _ = try connection.checked(connection.pq.exec("ROLLBACK"))
            }
        } catch {
            return false
        }
        return connection.isReusable
    }

    private func perform(_ actions: PoolStateMachine<PostgresConnection>.Actions) {
        for timer in actions.cancelTimers { timer.cancel() }
        for connection in actions.close { connection.close() }
        for (continuation, result) in actions.resume { continuation.resume(with: result) }
        for continuation in actions.shutdownComplete { continuation.resume() }
    }

    // MARK: LISTEN

    /// Listens on `channel` on a connection of its own, with its own thread that waits on the
    /// socket. LISTEN is in effect when this returns. The stream ends when its consumer stops
    /// (cancels or drops it) or on ``shutdown()``, and fails with ``PostgresError/Code/connectionLost``
    /// if the connection breaks (listen again; notifications sent meanwhile are lost).
    public func listen(channel: String) async throws -> AsyncThrowingStream<PostgresNotification, any Error> {
        guard self.listeners.withLock({ !$0.closed }) else {
            throw PostgresError(code: .poolShutdown, reason: "the client is shut down")
        }
        let threadPool = NIOThreadPool(numberOfThreads: 1)
        threadPool.start()
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(
                configuration: self.configuration,
                threadPool: threadPool,
                logger: self.logger
            )
            let quoted = try await connection.escapeIdentifier(channel)
            try await connection.execute(PostgresQuery(unsafeSQL: "LISTEN " + quoted))
        } catch {
            try? await threadPool.shutdownGracefully()
            throw error
        }

        let (stream, continuation) = AsyncThrowingStream.makeStream(of: PostgresNotification.self)
        let id = self.listeners.withLock { listeners in
            listeners.nextID += 1
            return listeners.nextID
        }
        let logger = self.logger
        let task = Task {
            do {
                while !Task.isCancelled {
                    // Short waits so that a cancelled consumer is noticed within a quarter second.
                    for notification in try await connection.waitForNotifications(timeoutMilliseconds: 250) {
                        continuation.yield(notification)
                    }
                }
                continuation.finish()
            } catch {
                logger.warning("postgres listening connection lost", metadata: ["db.error": "\(error)"])
                continuation.finish(throwing: error)
            }
            connection.close()
            try? await threadPool.shutdownGracefully()
            _ = self.listeners.withLock { $0.tasks.removeValue(forKey: id) }
        }
        continuation.onTermination = { _ in task.cancel() }
        let registered = self.listeners.withLock { listeners -> Bool in
            guard !listeners.closed else { return false }
            listeners.tasks[id] = task
            return true
        }
        if !registered { task.cancel() }
        return stream
    }
}
