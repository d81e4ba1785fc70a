import KindredHTTP2
import NIOCore

/// The lifecycle of one server connection, with no I/O: the handler reports what happened (a call opened, a
/// timer fired, a PING acknowledged) and performs the actions it gets back (send a frame, arm or cancel a
/// timer, close). Learned from swift-nio-http2's `NIOHTTP2ServerConnectionManagementHandler.StateMachine`.
///
/// ```
/// notStarted ──start──▶ active ──shutdown / max age──▶ quiescing ──PING ack / ping timeout──▶ closing
///                         │  GOAWAY(2^31-1) + PING        │                final GOAWAY(last id)   │
///                         │                               └──────────────grace──────────────┐    │ no calls
///                         └── idle / handshake / keepalive / abuse ──────────────────────▶ closed ◀┘
/// ```
///
/// Graceful shutdown takes one round trip: the first GOAWAY (maximum stream id) tells the client to open no
/// more streams, the PING that follows comes back only after every frame the client sent before it, so when
/// its ACK arrives every stream the client opened before seeing the GOAWAY has arrived too, and the final
/// GOAWAY can name the real last stream id without refusing any of them (RFC 9113 §6.8).
///
/// Per-call events (`callOpened`, `callClosed`) return at most one action and allocate nothing.
struct ServerConnectionStateMachine {
    struct Configuration: Equatable {
        /// A connection with no call this long is closed (nil: never).
        var idleTimeout: TimeAmount?
        /// A connection that has not opened a call this long after connecting is closed (nil: never).
        var firstRequestTimeout: TimeAmount?
        /// The client's first SETTINGS must arrive within this (nil: no limit).
        var handshakeTimeout: TimeAmount?
        /// Graceful shutdown begins this long after the connection started (already jittered; nil: never).
        var maxAge: TimeAmount?
        /// How long calls may finish once shutdown began because of `maxAge`.
        var maxAgeGrace: TimeAmount
        /// After this long without receiving anything, the server PINGs the client.
        var keepaliveTime: TimeAmount
        /// A keepalive PING not answered (nothing received) within this closes the connection.
        var keepaliveTimeout: TimeAmount
        /// Client PINGs closer together than this count as a strike.
        var minPingInterval: TimeAmount
        /// Whether client PINGs while no call is open are allowed (otherwise each is a strike).
        var permitPingWithoutCalls: Bool
        /// Strikes tolerated; one more closes the connection for abuse.
        var maxPingStrikes: Int
        /// How long to wait for the shutdown PING's ACK before sending the final GOAWAY anyway.
        var shutdownPingTimeout: TimeAmount
    }

    enum Phase: Equatable {
        /// The channel is not active yet.
        case notStarted
        case active
        /// GOAWAY with the maximum stream id and a PING sent; new streams are still served.
        case quiescing
        /// The final GOAWAY was sent (or the client sent one): the calls left finish, then the connection closes.
        case closing
        /// The connection is being closed or is closed; nothing more is started.
        case closed
    }

    /// Why a connection is drained: the calls still open when its grace period ends are told.
    enum DrainCause: Equatable {
        /// The server is stopping.
        case shutdown
        /// The connection reached its maximum age (`maxAge`) and is being replaced; the server carries on.
        case maxAge

        /// The message of the UNAVAILABLE status the calls left end with: a client reconnects either way, and a
        /// long-lived stream resumes on its new connection.
        var message: String {
            switch self {
            case .shutdown: "The server is shutting down"
            case .maxAge: "The connection reached its maximum age; reconnect"
            }
        }
    }

    enum Timer: Int, CaseIterable {
        case handshake, idle, maxAge, keepalive, keepaliveTimeout, shutdownPing, grace
    }

    enum Action: Equatable {
        case schedule(Timer, TimeAmount)
        case cancel(Timer)
        /// GOAWAY NO_ERROR with the maximum stream id: open no new streams (`nghttp2_submit_shutdown_notice`).
        case sendShutdownNotice
        case sendPing(UInt64)
        /// GOAWAY with the last stream id processed.
        case sendGoAway(HTTP2ErrorCode, debugData: String)
        /// The grace period is over: end the calls left with UNAVAILABLE, saying why.
        case failCalls(DrainCause)
        /// Count and log a timeout of the connection.
        case timedOut(ServerMetrics.Timeout)
        /// Close after the calls left and the output are gone (the handler checks `isDrained` as it flushes).
        case closeWhenDrained
        /// Write what is queued and close the channel now.
        case close
    }

    /// Opaque data of the keepalive PING ("KIND").
    static let keepalivePing: UInt64 = 0x4B49_4E44
    /// Opaque data of the graceful-shutdown PING ("GOAWAY").
    static let shutdownPing: UInt64 = 0x474F_4157_4159

    let configuration: Configuration
    private(set) var phase = Phase.notStarted
    /// Calls whose stream or handler is still alive.
    private(set) var openCalls = 0
    private(set) var sawRequest = false
    private(set) var handshakeComplete = false
    private(set) var pingStrikes = 0
    private var lastPingReceived: NIODeadline?
    private var lastRead: NIODeadline
    private var keepalive = KeepaliveState.idle
    /// When the grace period of a shutdown under way ends.
    private var graceDeadline: NIODeadline?
    /// Why the connection is drained (the server stopping wins over the connection's age).
    private var drainCause = DrainCause.shutdown
    /// Timers the handler has armed on our behalf, one bit per `Timer`.
    private var armed: UInt8 = 0

    private enum KeepaliveState { case idle, awaitingAck }

    init(configuration: Configuration, now: NIODeadline) {
        self.configuration = configuration
        self.lastRead = now
    }

    /// Whether the connection has nothing left to do and may close once its output is written.
    var isDrained: Bool {
        switch self.phase {
        case .closing: return self.openCalls == 0
        case .closed: return true
        case .notStarted, .active, .quiescing: return false
        }
    }

    func isArmed(_ timer: Timer) -> Bool { self.armed & (1 << timer.rawValue) != 0 }

    // MARK: Events

    /// The channel became active.
    mutating func start(now: NIODeadline) -> [Action] {
        guard self.phase == .notStarted else { return [] }
        self.phase = .active
        self.lastRead = now
        var actions: [Action] = []
        if let timeout = self.configuration.handshakeTimeout { actions.append(self.arm(.handshake, timeout)) }
        if let timeout = self.idleTimeout { actions.append(self.arm(.idle, timeout)) }
        if let age = self.configuration.maxAge { actions.append(self.arm(.maxAge, age)) }
        actions.append(self.arm(.keepalive, self.configuration.keepaliveTime))
        return actions
    }

    /// Bytes arrived from the client: it is alive.
    mutating func received(now: NIODeadline) -> Action? {
        self.lastRead = now
        guard self.keepalive == .awaitingAck else { return nil }
        self.keepalive = .idle
        return self.disarm(.keepaliveTimeout)
    }

    /// The client's first SETTINGS frame completes the handshake (the handler charges later ones).
    mutating func receivedSettings() -> Action? {
        guard !self.handshakeComplete else { return nil }
        self.handshakeComplete = true
        return self.disarm(.handshake)
    }

    /// Whether a new stream may become a call. After the final GOAWAY nghttp2 itself ignores streams above the
    /// last stream id; the ones at or below it are served.
    var acceptsCalls: Bool {
        switch self.phase {
        case .active, .quiescing, .closing: return true
        case .notStarted, .closed: return false
        }
    }

    /// A new stream's headers arrived, whether or not they become a call (an unknown method is answered at once):
    /// the client uses the connection, so its PING strikes reset and its first-request timeout gives way to
    /// the idle timeout.
    mutating func requestReceived() -> Action? {
        self.pingStrikes = 0
        guard !self.sawRequest else { return nil }
        self.sawRequest = true
        guard self.isArmed(.idle) else { return nil }
        guard let timeout = self.configuration.idleTimeout else { return self.disarm(.idle) }
        // The handler replaces the timer armed under the same name.
        return self.arm(.idle, timeout)
    }

    mutating func callOpened() -> Action? {
        self.openCalls += 1
        self.sawRequest = true
        // A request resets the PING strikes (as in gRPC C-core).
        self.pingStrikes = 0
        return self.disarm(.idle)
    }

    /// A call's stream and handler are both gone.
    mutating func callClosed() -> Action? {
        precondition(self.openCalls > 0, "callClosed without callOpened")
        self.openCalls -= 1
        guard self.openCalls == 0 else { return nil }
        switch self.phase {
        case .active:
            guard let timeout = self.configuration.idleTimeout, !self.isArmed(.idle) else { return nil }
            return self.arm(.idle, timeout)
        case .closing:
            return .closeWhenDrained
        case .notStarted, .quiescing, .closed:
            // Quiescing: the client may have opened a stream we have not seen yet; wait for the PING ACK.
            return nil
        }
    }

    /// We sent DATA: clients probe bandwidth with PINGs while they receive, so this resets the strikes (as in
    /// grpc C-core and grpc-go; DATA *received* does not).
    mutating func sentData() {
        self.pingStrikes = 0
    }

    /// A PING (not an ACK) arrived. Returns true when the strikes are exhausted: the handler then closes the
    /// connection for abuse (`closeForAbuse`).
    mutating func receivedPing(now: NIODeadline) -> Bool {
        defer { self.lastPingReceived = now }
        if self.openCalls == 0 && !self.configuration.permitPingWithoutCalls {
            self.pingStrikes += 1
        } else if let last = self.lastPingReceived, now - last < self.configuration.minPingInterval {
            self.pingStrikes += 1
        }
        return self.pingStrikes > self.configuration.maxPingStrikes
    }

    mutating func receivedPingAck(_ payload: UInt64) -> [Action] {
        switch payload {
        case Self.shutdownPing where self.phase == .quiescing:
            return self.sendFinalGoAway()
        case Self.keepalivePing where self.keepalive == .awaitingAck:
            self.keepalive = .idle
            return self.disarm(.keepaliveTimeout).map { [$0] } ?? []
        default:
            return []
        }
    }

    /// Begins a graceful shutdown (server stopping, or max age): first GOAWAY and PING now, the final GOAWAY
    /// one round trip later, and whatever is left after `grace` is failed. A second request can only shorten
    /// the grace period.
    mutating func beginGracefulShutdown(grace: TimeAmount, now: NIODeadline, cause: DrainCause = .shutdown) -> [Action] {
        switch self.phase {
        case .active:
            self.phase = .quiescing
            self.drainCause = cause
            self.graceDeadline = now + grace
            return [
                .sendShutdownNotice,
                .sendPing(Self.shutdownPing),
                self.arm(.shutdownPing, min(self.configuration.shutdownPingTimeout, grace)),
                self.arm(.grace, grace),
            ]
        case .quiescing, .closing:
            if cause == .shutdown { self.drainCause = .shutdown }
            guard let deadline = self.graceDeadline, now + grace < deadline else { return [] }
            self.graceDeadline = now + grace
            return [.cancel(.grace), self.arm(.grace, grace)]
        case .notStarted:
            // Nothing was served: just close (the phase stays, so teardown knows the connection never started).
            return [.close]
        case .closed:
            return []
        }
    }

    /// The client sent GOAWAY: it opens no more streams, so the connection ends with its last call.
    mutating func receivedGoAway() -> [Action] {
        switch self.phase {
        case .active, .quiescing:
            var actions: [Action] = []
            if let cancel = self.disarm(.shutdownPing) { actions.append(cancel) }
            self.phase = .closing
            if self.openCalls == 0 { actions.append(.closeWhenDrained) }
            return actions
        case .notStarted, .closing, .closed:
            return []
        }
    }

    /// The connection is closed for abuse (the handler sends GOAWAY ENHANCE_YOUR_CALM). False if it was
    /// already closing down for another reason, so a peer is penalised once.
    mutating func closeForAbuse() -> Bool {
        guard self.phase != .closed else { return false }
        self.phase = .closed
        return true
    }

    /// The connection is closed for a reason outside the lifecycle (an HTTP/2 error, a stalled writer).
    mutating func closeNow() {
        self.phase = .closed
    }

    /// The channel is gone: cancel every timer still armed.
    mutating func channelClosed() -> [Action] {
        self.phase = .closed
        var actions: [Action] = []
        for timer in Timer.allCases {
            if let cancel = self.disarm(timer) { actions.append(cancel) }
        }
        return actions
    }

    mutating func timerFired(_ timer: Timer, now: NIODeadline) -> [Action] {
        guard self.isArmed(timer) else { return [] }
        self.armed &= ~(1 << timer.rawValue)
        switch timer {
        case .handshake:
            guard !self.handshakeComplete, self.phase != .closed else { return [] }
            self.phase = .closed
            return [.timedOut(.handshake), .close]
        case .idle:
            guard self.openCalls == 0, self.phase == .active else { return [] }
            self.phase = .closed
            let goAway = Action.sendGoAway(.noError, debugData: "idle")
            return self.sawRequest ? [goAway, .close] : [.timedOut(.firstRequest), goAway, .close]
        case .maxAge:
            return self.beginGracefulShutdown(grace: self.configuration.maxAgeGrace, now: now, cause: .maxAge)
        case .keepalive:
            guard self.phase != .closed else { return [] }
            var actions: [Action] = []
            if now - self.lastRead >= self.configuration.keepaliveTime, self.keepalive == .idle {
                self.keepalive = .awaitingAck
                actions.append(.sendPing(Self.keepalivePing))
                actions.append(self.arm(.keepaliveTimeout, self.configuration.keepaliveTimeout))
            }
            actions.append(self.arm(.keepalive, self.configuration.keepaliveTime))
            return actions
        case .keepaliveTimeout:
            guard self.keepalive == .awaitingAck, self.phase != .closed else { return [] }
            self.phase = .closed
            return [.close]
        case .shutdownPing:
            guard self.phase == .quiescing else { return [] }
            return self.sendFinalGoAway()
        case .grace:
            switch self.phase {
            case .quiescing:
                self.phase = .closed
                var actions: [Action] = [.sendGoAway(.noError, debugData: "")]
                if let cancel = self.disarm(.shutdownPing) { actions.append(cancel) }
                return actions + [.failCalls(self.drainCause), .close]
            case .closing:
                self.phase = .closed
                return [.failCalls(self.drainCause), .close]
            case .notStarted, .active, .closed:
                return []
            }
        }
    }

    // MARK: Helpers

    private var idleTimeout: TimeAmount? {
        // Before its first request a connection gets the shorter `firstRequestTimeout`.
        if self.sawRequest { return self.configuration.idleTimeout }
        switch (self.configuration.idleTimeout, self.configuration.firstRequestTimeout) {
        case (let idle?, let first?): return min(idle, first)
        case (let idle?, nil): return idle
        case (nil, let first?): return first
        case (nil, nil): return nil
        }
    }

    private mutating func sendFinalGoAway() -> [Action] {
        self.phase = .closing
        var actions: [Action] = []
        if let cancel = self.disarm(.shutdownPing) { actions.append(cancel) }
        actions.append(.sendGoAway(.noError, debugData: ""))
        if self.openCalls == 0 { actions.append(.closeWhenDrained) }
        return actions
    }

    private mutating func arm(_ timer: Timer, _ delay: TimeAmount) -> Action {
        self.armed |= 1 << timer.rawValue
        return .schedule(timer, delay)
    }

    private mutating func disarm(_ timer: Timer) -> Action? {
        guard self.isArmed(timer) else { return nil }
        self.armed &= ~(1 << timer.rawValue)
        return .cancel(timer)
    }
}
