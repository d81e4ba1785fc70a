/// The connection pool's bookkeeping, without I/O: who holds a connection, which are idle, who waits.
///
/// Every event returns ``Actions`` that the client performs after leaving the lock (resume a waiter,
/// close connections, finish a shutdown), so no continuation is resumed while the lock is held. Generic over the
/// connection so that tests drive it with stand-ins, without a database.
struct PoolStateMachine<Connection: Sendable> {
    /// What an acquirer receives.
    enum Lease: Sendable {
        /// An idle connection and when it was last returned.
        case connection(Connection, idleSince: ContinuousClock.Instant)
        /// Permission to open a new connection (a slot counted in `opening`).
        case openSlot
    }

    struct Actions {
        var resume: [(CheckedContinuation<Lease, any Error>, Result<Lease, any Error>)] = []
        var close: [Connection] = []
        var cancelTimers: [Task<Void, Never>] = []
        var shutdownComplete: [CheckedContinuation<Void, Never>] = []
    }

    enum AcquireResult {
        case lease(Lease)
        case failed(PostgresError)
        case waiting
    }

    private struct Waiter {
        var id: Int
        var continuation: CheckedContinuation<Lease, any Error>
        var timer: Task<Void, Never>?
    }

    private struct IdleConnection {
        var connection: Connection
        var since: ContinuousClock.Instant
    }

    private enum Phase {
        case running
        case shuttingDown([CheckedContinuation<Void, Never>])
        case shutDown
    }

    let maxConnections: Int
    let idleTimeout: Duration?
    private var idle: [IdleConnection] = []
    private var waiters: [Waiter] = []
    private var leased = 0
    private var opening = 0
    private var phase = Phase.running
    private var totalOpened = 0
    private var totalClosed = 0
    private var acquireTimeouts = 0
    private var nextID = 0

    init(maxConnections: Int, idleTimeout: Duration?) {
        precondition(maxConnections > 0, "a pool needs at least one connection")
        self.maxConnections = maxConnections
        self.idleTimeout = idleTimeout
    }

    var isRunning: Bool {
        if case .running = self.phase { return true }
        return false
    }

    mutating func makeID() -> Int {
        self.nextID += 1
        return self.nextID
    }

    /// Hands out the most recently used idle connection, else a slot to open one, else queues.
    mutating func acquire(id: Int, continuation: CheckedContinuation<Lease, any Error>) -> AcquireResult {
        guard self.isRunning else {
            return .failed(PostgresError(code: .poolShutdown, reason: "the client is shut down"))
        }
        if let idle = self.idle.popLast() {
            self.leased += 1
            return .lease(.connection(idle.connection, idleSince: idle.since))
        }
        if self.leased + self.opening < self.maxConnections {
            self.opening += 1
            return .lease(.openSlot)
        }
        self.waiters.append(Waiter(id: id, continuation: continuation, timer: nil))
        return .waiting
    }

    /// Attaches the timeout timer of a waiter; returns the timer if the waiter is already gone.
    mutating func setTimer(_ timer: Task<Void, Never>, forWaiter id: Int) -> Task<Void, Never>? {
        guard let index = self.waiters.firstIndex(where: { $0.id == id }) else { return timer }
        self.waiters[index].timer = timer
        return nil
    }

    /// Removes a waiter whose timeout passed or whose task was cancelled.
    mutating func removeWaiter(id: Int, error: PostgresError) -> Actions {
        var actions = Actions()
        guard let index = self.waiters.firstIndex(where: { $0.id == id }) else { return actions }
        let waiter = self.waiters.remove(at: index)
        if error.code == .poolTimeout { self.acquireTimeouts += 1 }
        actions.resume.append((waiter.continuation, .failure(error)))
        if let timer = waiter.timer { actions.cancelTimers.append(timer) }
        return actions
    }

    /// An open slot produced a connection.
    mutating func opened() {
        self.opening -= 1
        self.leased += 1
        self.totalOpened += 1
    }

    /// Opening a connection failed: the slot is free again for the next waiter.
    mutating func openFailed() -> Actions {
        self.opening -= 1
        var actions = Actions()
        self.handOutFreeSlot(&actions)
        self.finishShutdownIfIdle(&actions)
        return actions
    }

    /// A leased connection comes back. Unusable ones are closed and their slot handed on.
    mutating func release(_ connection: Connection, reusable: Bool, now: ContinuousClock.Instant) -> Actions {
        self.leased -= 1
        var actions = Actions()
        guard self.isRunning else {
            self.totalClosed += 1
            actions.close.append(connection)
            self.finishShutdownIfIdle(&actions)
            return actions
        }
        if reusable {
            if !self.waiters.isEmpty {
                let waiter = self.waiters.removeFirst()
                self.leased += 1
                actions.resume.append((waiter.continuation, .success(.connection(connection, idleSince: now))))
                if let timer = waiter.timer { actions.cancelTimers.append(timer) }
            } else {
                self.idle.append(IdleConnection(connection: connection, since: now))
            }
        } else {
            self.totalClosed += 1
            actions.close.append(connection)
            self.handOutFreeSlot(&actions)
        }
        self.pruneIdle(now: now, into: &actions)
        return actions
    }

    /// Starts the shutdown: waiters fail, idle connections close; leased ones close when returned.
    mutating func shutdown(_ continuation: CheckedContinuation<Void, Never>) -> Actions {
        var actions = Actions()
        switch self.phase {
        case .shutDown:
            actions.shutdownComplete.append(continuation)
            return actions
        case .shuttingDown(let continuations):
            self.phase = .shuttingDown(continuations + [continuation])
            return actions
        case .running:
            self.phase = .shuttingDown([continuation])
        }
        for waiter in self.waiters {
            actions.resume.append(
                (waiter.continuation, .failure(PostgresError(code: .poolShutdown, reason: "the client is shut down")))
            )
            if let timer = waiter.timer { actions.cancelTimers.append(timer) }
        }
        self.waiters.removeAll()
        actions.close += self.idle.map(\.connection)
        self.totalClosed += self.idle.count
        self.idle.removeAll()
        self.finishShutdownIfIdle(&actions)
        return actions
    }

    var statistics: PostgresPoolStatistics {
        PostgresPoolStatistics(
            inUse: self.leased,
            idle: self.idle.count,
            opening: self.opening,
            waiting: self.waiters.count,
            totalOpened: self.totalOpened,
            totalClosed: self.totalClosed,
            acquireTimeouts: self.acquireTimeouts
        )
    }

    private mutating func handOutFreeSlot(_ actions: inout Actions) {
        guard self.isRunning, !self.waiters.isEmpty, self.leased + self.opening < self.maxConnections else { return }
        let waiter = self.waiters.removeFirst()
        self.opening += 1
        actions.resume.append((waiter.continuation, .success(.openSlot)))
        if let timer = waiter.timer { actions.cancelTimers.append(timer) }
    }

    private mutating func finishShutdownIfIdle(_ actions: inout Actions) {
        guard case .shuttingDown(let continuations) = self.phase, self.leased == 0, self.opening == 0 else { return }
        self.phase = .shutDown
        actions.shutdownComplete += continuations
    }

    /// Closes connections idle for longer than `idleTimeout` (the oldest are at the front).
    private mutating func pruneIdle(now: ContinuousClock.Instant, into actions: inout Actions) {
        guard let idleTimeout = self.idleTimeout else { return }
        while let oldest = self.idle.first, oldest.since.duration(to: now) > idleTimeout {
            self.idle.removeFirst()
            self.totalClosed += 1
            actions.close.append(oldest.connection)
        }
    }
}

/// A snapshot of the pool, for metrics (`KindredServiceKit.PostgresPoolMetrics` records it).
public struct PostgresPoolStatistics: Sendable, Hashable {
    /// Connections lent to callers.
    public var inUse: Int
    /// Open connections waiting in the pool.
    public var idle: Int
    /// Connections being opened.
    public var opening: Int
    /// Callers waiting for a connection.
    public var waiting: Int
    /// Connections opened since the client started.
    public var totalOpened: Int
    /// Connections closed (broken, idle too long, shut down) since the client started.
    public var totalClosed: Int
    /// Acquisitions that failed with ``PostgresError/Code/poolTimeout``.
    public var acquireTimeouts: Int
    /// Notifications queued after commits and not sent yet (``PostgresClient/queueNotification(channel:payload:)``).
    public var notificationsQueued: Int
    /// Notifications sent since the client started.
    public var notificationsSent: Int
    /// Notifications dropped since the client started (the queue was full while the database was unreachable).
    public var notificationsDropped: Int

    public init(
        inUse: Int,
        idle: Int,
        opening: Int,
        waiting: Int,
        totalOpened: Int,
        totalClosed: Int,
        acquireTimeouts: Int,
        notificationsQueued: Int = 0,
        notificationsSent: Int = 0,
        notificationsDropped: Int = 0
    ) {
        self.inUse = inUse
        self.idle = idle
        self.opening = opening
        self.waiting = waiting
        self.totalOpened = totalOpened
        self.totalClosed = totalClosed
        self.acquireTimeouts = acquireTimeouts
        self.notificationsQueued = notificationsQueued
        self.notificationsSent = notificationsSent
        self.notificationsDropped = notificationsDropped
    }
}
