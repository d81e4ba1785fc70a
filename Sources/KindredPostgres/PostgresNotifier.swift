import Logging
import NIOPosix
import Synchronization

/// Sends NOTIFYs about work that is already committed, on a connection of its own whose commits do not wait for
/// the WAL flush (`synchronous_commit=off`): ``PostgresClient/queueNotification(channel:payload:)`` and
/// ``PostgresTransaction/queueNotification(channel:payload:)`` hand it their notifications and return at once.
///
/// Why not `pg_notify` in the writing transaction: PostgreSQL makes every committing transaction that notified take
/// one lock, the same for the whole server, and hold it until its commit is flushed, so that notifications queue in
/// commit order. Durable writes that notify therefore commit one at a time, each waiting out its own WAL flush,
/// instead of sharing flushes (group commit): about 5,000 commits/s at most on this machine's PostgreSQL alone
/// (pgbench, 64 clients, an insert and a `pg_notify`; 30,000–34,000 without the `pg_notify`), and about 1,100 in a
/// loaded chat-server, where 12–19 sends at a time waited on that lock. Here a notifying commit writes no data and
/// flushes nothing, so it holds the lock for microseconds.
///
/// Whoever listens must so treat a notification as "look", never as the only copy of what happened: it arrives
/// after the commit (a reader that looks at once sees what it announces), possibly merged with others (PostgreSQL
/// sends identical channel and payload pairs of one transaction once), and it is lost if the process stops before
/// it is sent, or while the database is unreachable for longer than the queue holds. The listeners of this
/// repository read their tables for the truth (relays also look on a timer; chat streams catch up on a gap and on
/// a replica's start).
///
/// Notifications go in the order they were queued, at most ``maxBatch`` per statement, one statement at a time:
/// those queued while one is in flight go together in the next.
final class PostgresNotifier: Sendable {
    /// Notifications sent per statement at most.
    static let maxBatch = 1000
    /// Notifications kept while the database cannot be reached (beside the batch in hand); the oldest are dropped
    /// beyond it.
    static let capacity = 100_000

    private struct State {
        var queue: [(channel: String, payload: String)] = []
        var waiter: CheckedContinuation<Void, Never>?
        var stopping = false
        /// Dropped since the last warning.
        var dropped = 0
        var totalSent = 0
        var totalDropped = 0
        /// The batch being sent (out of `queue`).
        var inFlight = 0
    }

    private let state = Mutex(State())
    private let configuration: PostgresConfiguration
    private let logger: Logger
    private let loop = Mutex<Task<Void, Never>?>(nil)

    init(configuration: PostgresConfiguration, logger: Logger) {
        var configuration = configuration
        configuration.settings["synchronous_commit"] = "off"
        self.configuration = configuration
        self.logger = logger
    }

    /// PostgreSQL refuses a payload of 8000 bytes or more, and a channel name is an identifier (63 bytes at most).
    static func isSendable(channel: String, payload: String) -> Bool {
        (1...63).contains(channel.utf8.count) && payload.utf8.count < 8000
    }

    /// Queues notifications; the first call starts the sending loop. One PostgreSQL would refuse is dropped (and
    /// logged) here, so that it cannot hold back the others.
    func send(_ notifications: some Collection<(channel: String, payload: String)>) {
        guard !notifications.isEmpty else { return }
        let refused = notifications.count { !Self.isSendable(channel: $0.channel, payload: $0.payload) }
        if refused > 0 {
            self.logger.error(
                "postgres notification dropped: its channel or payload is too long",
                metadata: ["db.notifications_dropped": "\(refused)"])
        }
        let (waiter, start) = self.state.withLock { state -> (CheckedContinuation<Void, Never>?, Bool) in
            guard !state.stopping else { return (nil, false) }
            state.totalDropped += refused
            if refused == 0 {
                state.queue.append(contentsOf: notifications)
            } else {
                state.queue.append(
                    contentsOf: notifications.filter { Self.isSendable(channel: $0.channel, payload: $0.payload) })
            }
            if state.queue.count > Self.capacity {
                let excess = state.queue.count - Self.capacity
                state.dropped += excess
                state.totalDropped += excess
                state.queue.removeFirst(excess)
            }
            defer { state.waiter = nil }
            return (state.waiter, true)
        }
        waiter?.resume()
        if start { self.startIfNeeded() }
    }

    /// Sends what is queued (waiting at most `timeout` for the database), then stops.
    func shutdown(timeout: Duration = .seconds(2)) async {
        self.stop()
        guard let task = self.loop.withLock({ $0 }) else { return }
        let deadline = Task {
            try? await Task.sleep(for: timeout)
            task.cancel()
        }
        await task.value
        deadline.cancel()
    }

    /// Notifications waiting or being sent, sent, and dropped (for the pool's statistics).
    var counts: (queued: Int, sent: Int, dropped: Int) {
        self.state.withLock { ($0.queue.count + $0.inFlight, $0.totalSent, $0.totalDropped) }
    }

    /// Refuses further notifications; the loop sends what is queued and ends.
    func stop() {
        let waiter = self.state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.stopping = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    private func startIfNeeded() {
        self.loop.withLock { loop in
            guard loop == nil else { return }
            loop = Task { await self.run() }
        }
    }

    /// The next notifications to send: waits while none are queued; nil once stopping with nothing left.
    private func next() async -> [(channel: String, payload: String)]? {
        while true {
            enum Step { case batch([(channel: String, payload: String)]), done, wait }
            let step = self.state.withLock { state -> Step in
                if !state.queue.isEmpty {
                    let count = min(Self.maxBatch, state.queue.count)
                    state.inFlight = count
                    defer { state.queue.removeFirst(count) }
                    return .batch(Array(state.queue.prefix(count)))
                }
                state.inFlight = 0
                return state.stopping ? .done : .wait
            }
            switch step {
            case .batch(let batch): return batch
            case .done: return nil
            case .wait:
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = self.state.withLock { state -> Bool in
                        if !state.queue.isEmpty || state.stopping { return true }
                        state.waiter = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            }
        }
    }

    private func run() async {
        let threadPool = NIOThreadPool(numberOfThreads: 1)
        threadPool.start()
        var connection: PostgresConnection?
        var failures = 0
        var batch = await self.next()
        while let notifications = batch, !Task.isCancelled {
            do {
                if connection == nil || connection!.isClosed {
                    connection = try await PostgresConnection.connect(
                        configuration: self.configuration, threadPool: threadPool, logger: self.logger)
                }
                try await connection!.execute(
                    """
                    SELECT pg_notify(channel, payload) IS NULL
                    FROM unnest(\(notifications.map(\.channel)), \(notifications.map(\.payload))) AS n(channel, payload)
                    """
                )
                failures = 0
                let dropped = self.state.withLock { state in
                    state.totalSent += notifications.count
                    state.inFlight = 0
                    defer { state.dropped = 0 }
                    return state.dropped
                }
                if dropped > 0 {
                    self.logger.warning(
                        "postgres notifications dropped while the database was unreachable",
                        metadata: ["db.notifications_dropped": "\(dropped)"])
                }
                batch = await self.next()
            } catch let error as PostgresError where error.sqlState?.hasPrefix("22") == true {
                // A data exception is the batch's, not the connection's: sending it again would fail again.
                self.logger.error(
                    "postgres notifications dropped: the server refused them",
                    metadata: ["db.error": "\(error)", "db.notifications_dropped": "\(notifications.count)"])
                self.state.withLock { state in
                    state.totalDropped += notifications.count
                    state.inFlight = 0
                }
                batch = await self.next()
            } catch {
                // The same notifications again on a new connection, after a pause that grows to a second.
                failures += 1
                if failures == 1 {
                    self.logger.warning("postgres notifications not sent; retrying", metadata: ["db.error": "\(error)"])
                }
                connection?.close()
                connection = nil
                try? await Task.sleep(for: .milliseconds(min(1000, 50 * failures)))
            }
        }
        connection?.close()
        try? await threadPool.shutdownGracefully()
    }
}
