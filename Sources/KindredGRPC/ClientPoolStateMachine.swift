import NIOCore

/// Which HTTP/2 connection of a client's pool a call goes on, without I/O: how many streams each connection's
/// peer allows (its SETTINGS_MAX_CONCURRENT_STREAMS) and holds open, which connections are being opened, and
/// which calls wait for a stream slot.
///
/// A call takes a slot on a ready connection with room (round-robin over them). When every connection is full,
/// the pool opens another one, up to `maxConnections` and one at a time beyond `preferredConnections`; past
/// that the call waits, first come first served, until a slot frees, and fails with RESOURCE_EXHAUSTED when its
/// deadline passes first (or at once when `maxWaiting` calls already wait); a call whose deadline passes while
/// its connection is still being opened fails with DEADLINE_EXCEEDED, as a started call would. RESOURCE_EXHAUSTED, not UNAVAILABLE:
/// the target is reachable, this client has used up what the target allows it (gRPC's status-codes doc lists
/// client-side resource limits under RESOURCE_EXHAUSTED), and a retry loop on UNAVAILABLE would only add load.
/// A connection counts as ready only once the peer's first SETTINGS arrived (as grpc-go waits for the server
/// preface): before, its limit is unknown and streams beyond it would be refused.
///
/// Every event returns `Actions` that the pool performs after leaving its lock (open a connection, resume a
/// waiting call, close a connection). Generic over the connection and the waiting call, so tests drive it with
/// stand-ins (ClientPoolStateMachineTests).
struct ClientPoolStateMachine<Connection: Sendable, Waiter: Sendable>: Sendable {
    struct Limits: Sendable {
        /// Connections opened to spread calls even before one is full (`connectionCount`).
        var preferredConnections: Int
        /// Connections opened at most, when all are full (`maxConnectionCount`, at least `preferredConnections`).
        var maxConnections: Int
        /// Calls that may wait for a slot; the next one fails at once.
        var maxWaiting: Int
    }

    /// A stream slot on a connection, held from the pick until the call ends (`released(entry:)`).
    struct Lease: Sendable {
        let connection: Connection
        let entry: Int
    }

    struct Actions {
        /// Entries to open a connection for (`connected` or `connectFailed` follows).
        var connect: [Int] = []
        /// Waiting calls to resume, with a slot or their failure.
        var resume: [(Waiter, Result<Lease, RPCError>)] = []
        /// Connections to close once their calls are done (the pool closed).
        var close: [Connection] = []
    }

    enum AcquireResult {
        case lease(Lease)
        case waiting
        case failed(RPCError)
    }

    private enum EntryState: Sendable {
        /// TCP, TLS or the HTTP/2 preface under way: the peer's limit is not known yet.
        case connecting
        case ready(Connection, limit: Int, open: Int)
    }

    private struct Entry: Sendable {
        let id: Int
        var state: EntryState
    }

    let limits: Limits
    /// Where the target is, for messages.
    let authority: String
    private var entries: [Entry] = []
    private var waiters: [(id: Int, waiter: Waiter)] = []
    private var next = 0
    private var nextEntryID = 0
    /// Failed connection attempts in a row, and when the next may start (connection backoff).
    private var failures = 0
    private var retryAt: NIODeadline?
    private var closed = false

    init(limits: Limits, authority: String) {
        self.limits = Limits(
            preferredConnections: max(1, limits.preferredConnections),
            maxConnections: max(1, limits.preferredConnections, limits.maxConnections),
            maxWaiting: max(0, limits.maxWaiting)
        )
        self.authority = authority
    }

    /// Failed attempts in a row: the backoff's attempt number.
    var connectFailures: Int { self.failures }
    var waitingCount: Int { self.waiters.count }
    var connectionCount: Int { self.entries.count }
    /// Streams held per ready connection and what its peer allows, in entry order (for tests and logs).
    var streams: [(open: Int, limit: Int)] {
        self.entries.compactMap { entry in
            if case .ready(_, let limit, let open) = entry.state { return (open, limit) }
            return nil
        }
    }

    // MARK: Calls

    /// A call wants a stream slot: a free slot on a ready connection, else it waits (and a connection may be
    /// opened for it), else it fails: UNAVAILABLE when no connection exists or can be attempted now (backoff),
    /// RESOURCE_EXHAUSTED when too many calls wait already.
    mutating func acquire(id: Int, waiter: Waiter, now: NIODeadline) -> (AcquireResult, Actions) {
        var actions = Actions()
        guard !self.closed else { return (.failed(RPCError(.unavailable, "The client is closed")), actions) }
        if self.waiters.isEmpty, let lease = self.takeFreeSlot() {
            return (.lease(lease), actions)
        }
        // No room: open connections up to `preferredConnections` while calls arrive (load spreads over them),
        // then one at a time up to `maxConnections`.
        if self.mayConnect(now: now),
            self.entries.count < self.limits.preferredConnections
                || (!self.hasConnecting && self.entries.count < self.limits.maxConnections)
        {
            actions.connect.append(self.addEntry())
        }
        if self.entries.isEmpty {
            return (.failed(self.unavailable()), actions)
        }
        guard self.waiters.count < self.limits.maxWaiting else {
            return (.failed(self.exhausted("\(self.waiters.count) calls already wait for one")), actions)
        }
        self.waiters.append((id, waiter))
        return (.waiting, actions)
    }

    /// A call's slot is free again (the call ended). Ignored for connections already gone.
    mutating func released(entry: Int, now: NIODeadline) -> Actions {
        var actions = Actions()
        guard let index = self.index(of: entry), case .ready(let connection, let limit, let open) = self.entries[index].state
        else { return actions }
        self.entries[index].state = .ready(connection, limit: limit, open: open - 1)
        self.serveWaiters(&actions, now: now)
        return actions
    }

    /// A waiting call stops waiting (its deadline passed, its task was cancelled): the caller fails it, with
    /// `deadlineError()` for a deadline. Nil if it is not waiting any more.
    mutating func stopWaiting(id: Int) -> Waiter? {
        guard let index = self.waiters.firstIndex(where: { $0.id == id }) else { return nil }
        return self.waiters.remove(at: index).waiter
    }

    /// The error of a call whose deadline passed while it waited: RESOURCE_EXHAUSTED when it waited for a stream
    /// on full connections, DEADLINE_EXCEEDED when no connection came up in time (as if the call had started).
    func deadlineError() -> RPCError {
        if self.streams.isEmpty {
            return RPCError(.deadlineExceeded, "Deadline exceeded while connecting to \(self.authority)")
        }
        return self.exhausted("none freed before the deadline")
    }

    // MARK: Connections

    /// The connection of `entry` is up and the peer's first SETTINGS arrived, allowing `limit` streams.
    mutating func connected(entry: Int, connection: Connection, limit: Int, now: NIODeadline) -> Actions {
        var actions = Actions()
        guard !self.closed, let index = self.index(of: entry), case .connecting = self.entries[index].state else {
            actions.close.append(connection)
            return actions
        }
        self.entries[index].state = .ready(connection, limit: max(0, limit), open: 0)
        self.failures = 0
        self.retryAt = nil
        self.serveWaiters(&actions, now: now)
        return actions
    }

    /// The peer changed its SETTINGS_MAX_CONCURRENT_STREAMS. Streams above a lowered limit run to their end.
    mutating func limitChanged(entry: Int, limit: Int, now: NIODeadline) -> Actions {
        var actions = Actions()
        guard let index = self.index(of: entry), case .ready(let connection, _, let open) = self.entries[index].state
        else { return actions }
        self.entries[index].state = .ready(connection, limit: max(0, limit), open: open)
        self.serveWaiters(&actions, now: now)
        return actions
    }

    /// Opening the connection of `entry` failed: no new attempt before `now + retryDelay` (backoff). Waiting calls
    /// fail with UNAVAILABLE if no other connection is left to serve them.
    mutating func connectFailed(entry: Int, now: NIODeadline, retryDelay: TimeAmount) -> Actions {
        var actions = Actions()
        guard let index = self.index(of: entry) else { return actions }
        self.entries.remove(at: index)
        self.failures += 1
        self.retryAt = now + retryDelay
        self.failWaitersIfNothingLeft(&actions, RPCError(.unavailable, "Failed to connect to \(self.authority)"))
        return actions
    }

    /// The connection of `entry` takes no new streams (GOAWAY, or it closed). Its calls run to their end on it;
    /// waiting calls get a new connection when one may be opened.
    mutating func drained(entry: Int, now: NIODeadline) -> Actions {
        var actions = Actions()
        guard let index = self.index(of: entry) else { return actions }
        self.entries.remove(at: index)
        if !self.waiters.isEmpty, !self.hasConnecting, self.mayConnect(now: now) {
            actions.connect.append(self.addEntry())
        }
        self.failWaitersIfNothingLeft(&actions, self.unavailable())
        return actions
    }

    /// The client closes: waiting calls fail, ready connections close once their calls are done, connections
    /// still opening close when they come up.
    mutating func close() -> Actions {
        var actions = Actions()
        self.closed = true
        for entry in self.entries {
            if case .ready(let connection, _, _) = entry.state { actions.close.append(connection) }
        }
        self.entries.removeAll()
        for (_, waiter) in self.waiters {
            actions.resume.append((waiter, .failure(RPCError(.unavailable, "The client is closed"))))
        }
        self.waiters.removeAll()
        return actions
    }

    // MARK: Internals

    private var hasConnecting: Bool {
        self.entries.contains { if case .connecting = $0.state { true } else { false } }
    }

    private func mayConnect(now: NIODeadline) -> Bool {
        !self.closed && (self.retryAt.map { $0 <= now } ?? true)
    }

    private func index(of entry: Int) -> Int? {
        self.entries.firstIndex { $0.id == entry }
    }

    private mutating func addEntry() -> Int {
        self.nextEntryID += 1
        self.entries.append(Entry(id: self.nextEntryID, state: .connecting))
        return self.nextEntryID
    }

    /// A slot on the next ready connection with room, round-robin.
    private mutating func takeFreeSlot() -> Lease? {
        let count = self.entries.count
        for offset in 0..<count {
            let index = (self.next + offset) % count
            guard case .ready(let connection, let limit, let open) = self.entries[index].state, open < limit else {
                continue
            }
            self.entries[index].state = .ready(connection, limit: limit, open: open + 1)
            self.next = (index + 1) % count
            return Lease(connection: connection, entry: self.entries[index].id)
        }
        return nil
    }

    /// Hands free slots to waiting calls in arrival order; opens one more connection if calls still wait.
    private mutating func serveWaiters(_ actions: inout Actions, now: NIODeadline) {
        while !self.waiters.isEmpty, let lease = self.takeFreeSlot() {
            actions.resume.append((self.waiters.removeFirst().waiter, .success(lease)))
        }
        if !self.waiters.isEmpty, !self.hasConnecting, self.entries.count < self.limits.maxConnections,
            self.mayConnect(now: now)
        {
            actions.connect.append(self.addEntry())
        }
    }

    private mutating func failWaitersIfNothingLeft(_ actions: inout Actions, _ error: RPCError) {
        guard self.entries.isEmpty else { return }
        for (_, waiter) in self.waiters { actions.resume.append((waiter, .failure(error))) }
        self.waiters.removeAll()
    }

    private func unavailable() -> RPCError {
        RPCError(.unavailable, "No connection to \(self.authority) is available")
    }

    private func exhausted(_ reason: String) -> RPCError {
        RPCError(
            .resourceExhausted,
            "Every stream the server allows on this client's \(self.entries.count) connection(s) to \(self.authority) is in use and \(reason)"
        )
    }
}

