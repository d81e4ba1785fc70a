import KindredHTTP2
import NIOCore

/// What a server connection's limits decide, without I/O: which peer frames are charged to the abuse budget,
/// when writers wait for the connection's queued output and when they go on, which handlers may start
/// (`HandlerAdmission`), and when the request-body timer must fire. `ServerConnectionHandler` asks, passing in
/// the time and the bytes nghttp2 holds, and does what the answer says (close, resume, schedule).
///
/// A value type like `ServerConnectionStateMachine`, tested without I/O (`ServerConnectionLimitsTests`).
struct ServerConnectionLimits: Sendable {
    struct Configuration: Sendable, Hashable {
        /// Output queued on one stream above which its writer waits (`GRPCServerConfiguration.outboundHighWatermark`).
        var streamHighWatermark: Int
        /// Output queued on the whole connection above which every writer waits and no handler starts
        /// (`GRPCServerConfiguration.connectionOutboundHighWatermark`).
        var connectionHighWatermark: Int
        var abuseBudget: HTTP2AbuseBudget.Configuration
    }

    /// Small WINDOW_UPDATEs each stream may send free: grpcio sends a few as a call starts and as it reads.
    static let freeWindowUpdatesPerStream = 8
    /// The most free connection WINDOW_UPDATEs saved up by sending DATA.
    static let maxFreeWindowUpdates = 10_000

    /// Whether a frame that cost work without carrying any (`HTTP2PeerEvent`) is free or charged.
    enum PeerEventDecision: Sendable, Hashable {
        /// Free: one of the stream's own small WINDOW_UPDATEs (count it on the stream).
        case freeForStream
        /// Free: a small connection WINDOW_UPDATE answering DATA we sent.
        case free
        /// Charged to the abuse budget (`charge`).
        case charge
    }

    /// What a charge to the abuse budget leaves.
    enum ChargeDecision: Sendable, Hashable {
        case withinBudget
        /// The budget is exhausted: GOAWAY ENHANCE_YOUR_CALM and close.
        case closeForAbuse
    }

    /// What a writer that wants to queue another message does.
    enum WriterDecision: Sendable, Hashable {
        case write
        /// Its stream holds more than its watermark: it goes on when the stream drains (`writerMayResume`).
        case waitForStream
        /// The connection holds more than its watermark: it goes on when the connection drains
        /// (`takeConnectionBlockedWriters`).
        case waitForConnection
    }

    let configuration: Configuration
    private var abuseBudget: HTTP2AbuseBudget
    /// Small connection WINDOW_UPDATEs that are free: two per DATA frame we sent (a peer may answer each frame
    /// with an update of its size, however small). A +1 flood with nothing sent is charged.
    private(set) var freeWindowUpdates = 0
    /// Streams whose writer waits for the connection's queued output to drain.
    private(set) var connectionBlockedWriters: Set<Int32> = []
    /// Handlers that may not start yet because the connection's output is at its cap.
    private(set) var admission: HandlerAdmission
    /// When the connection's one request-body timer fires (the earliest body deadline of its calls), if armed.
    private(set) var bodyTimerDeadline: NIODeadline?

    init(configuration: Configuration, now: NIODeadline) {
        self.configuration = configuration
        self.abuseBudget = HTTP2AbuseBudget(configuration: configuration.abuseBudget, now: now)
        self.admission = HandlerAdmission(cap: configuration.connectionHighWatermark)
    }

    /// Tokens left in the abuse budget.
    var remainingBudget: Int { self.abuseBudget.remaining }

    // MARK: Abuse budget

    /// Whether a peer frame that cost work without carrying any goes free. `streamSmallWindowUpdates` is how many
    /// small WINDOW_UPDATEs the frame's stream has sent so far (nil for the connection, or a stream without a call).
    mutating func peerEvent(_ event: HTTP2PeerEvent, streamSmallWindowUpdates: Int?) -> PeerEventDecision {
        guard event == .smallWindowUpdate else { return .charge }
        if let sent = streamSmallWindowUpdates, sent < Self.freeWindowUpdatesPerStream { return .freeForStream }
        guard self.freeWindowUpdates > 0 else { return .charge }
        self.freeWindowUpdates -= 1
        return .free
    }

    /// Charges `event` (a refused stream, or a frame `peerEvent` did not let go free) to the abuse budget at `now`.
    mutating func charge(_ event: HTTP2PeerEvent, now: NIODeadline) -> ChargeDecision {
        self.abuseBudget.charge(event, now: now) ? .withinBudget : .closeForAbuse
    }

    /// A DATA frame went out: the peer may answer it with two small WINDOW_UPDATEs (stream and connection).
    mutating func sentData() {
        if self.freeWindowUpdates < Self.maxFreeWindowUpdates { self.freeWindowUpdates += 2 }
    }

    // MARK: Output watermarks

    /// Whether a writer may queue its next message with `streamQueued` bytes queued on its stream and
    /// `connectionQueued` on the connection. One blocked by the connection is remembered until it drains.
    mutating func writer(_ streamID: Int32, streamQueued: Int, connectionQueued: Int) -> WriterDecision {
        if connectionQueued > self.configuration.connectionHighWatermark {
            self.connectionBlockedWriters.insert(streamID)
            return .waitForConnection
        }
        return streamQueued > self.configuration.streamHighWatermark ? .waitForStream : .write
    }

    /// Whether a stream holding `streamQueued` bytes is at or under its watermark (a writer woken by the
    /// connection goes on only then).
    func streamHasRoom(streamQueued: Int) -> Bool {
        streamQueued <= self.configuration.streamHighWatermark
    }

    /// Whether a stream holding `streamQueued` bytes has drained enough (to half its watermark) for its waiting
    /// writer to go on.
    func streamDrained(streamQueued: Int) -> Bool {
        streamQueued <= self.configuration.streamHighWatermark / 2
    }

    /// The writer of a drained stream goes on unless the connection holds more than its watermark; then it waits
    /// for the connection (its stream has room, the connection not yet).
    mutating func writerMayResume(_ streamID: Int32, connectionQueued: Int) -> Bool {
        if connectionQueued > self.configuration.connectionHighWatermark {
            self.connectionBlockedWriters.insert(streamID)
            return false
        }
        self.connectionBlockedWriters.remove(streamID)
        return true
    }

    /// Once the connection's queued output is down to half its watermark, the writers waiting on it are taken
    /// (each may still wait for its own stream); before that, none.
    mutating func takeConnectionBlockedWriters(connectionQueued: Int) -> Set<Int32> {
        guard !self.connectionBlockedWriters.isEmpty,
            connectionQueued <= self.configuration.connectionHighWatermark / 2
        else { return [] }
        defer { self.connectionBlockedWriters.removeAll() }
        return self.connectionBlockedWriters
    }

    /// A stream closed: it waits for nothing any more.
    mutating func streamClosed(_ streamID: Int32) {
        self.connectionBlockedWriters.remove(streamID)
        self.admission.remove(streamID)
    }

    // MARK: Handler admission

    /// Whether the handler of `streamID` may start now (see `HandlerAdmission.mayStart`); if not, it waits in line.
    mutating func handlerMayStart(_ streamID: Int32, connectionQueued: Int) -> Bool {
        self.admission.mayStart(streamID, queuedOutput: connectionQueued)
    }

    /// The handlers that should ask again, oldest first: none until the connection's output has drained to half
    /// its cap.
    func handlersToWake(connectionQueued: Int) -> [Int32] {
        self.admission.shouldWake(queuedOutput: connectionQueued) ? self.admission.waiting : []
    }

    /// A call ended before its handler started: it leaves the line.
    mutating func callCancelled(_ streamID: Int32) {
        self.admission.remove(streamID)
    }

    // MARK: Request-body timer

    /// A call's body (or streaming message) must be complete by `deadline`. Returns true when the connection's
    /// body timer must be (re)scheduled at `deadline`: it is not armed, or armed later.
    mutating func watchBody(until deadline: NIODeadline) -> Bool {
        if let armed = self.bodyTimerDeadline, armed <= deadline { return false }
        self.bodyTimerDeadline = deadline
        return true
    }

    /// The body timer fired: it is not armed any more.
    mutating func bodyTimerFired() {
        self.bodyTimerDeadline = nil
    }
}

extension ServerConnectionLimits.Configuration {
    init(_ configuration: GRPCServerConfiguration) {
        self.init(
            streamHighWatermark: configuration.outboundHighWatermark,
            connectionHighWatermark: configuration.connectionOutboundHighWatermark,
            abuseBudget: configuration.abuseBudget
        )
    }
}
