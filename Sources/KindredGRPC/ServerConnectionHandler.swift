import KindredHTTP2
import Logging
import NIOCore

/// Serves gRPC on one connection: owns its nghttp2 session, maps streams to calls and runs their handlers.
/// Everything here runs on the channel's event loop.
///
/// By concern, one file each: this one holds the state and the channel events (I/O); `+Output` writes what
/// nghttp2 queued, batched once per read or loop tick; `+HTTP2Events` turns the session's events into calls;
/// `+Calls` is the call lifecycle its handlers see (`ServerCallConnection`: read, write, finish, cancel);
/// `+Limits` acts on the abuse, watermark and admission decisions of `ServerConnectionLimits`; `+Lifecycle`
/// performs the actions of `ServerConnectionStateMachine`.
final class ServerConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let router: GRPCRouter
    let configuration: GRPCServerConfiguration
    let logger: Logger
    let metrics: ServerMetrics
    let penalties: AbusePenalties?
    var session: HTTP2Session?
    var context: ChannelHandlerContext?
    var executor: EventLoopTaskExecutor?
    var calls: [Int32: ServerCall] = [:]
    /// Streams answered before their request ended, to reset with NO_ERROR once the answer is sent.
    var answeredEarly: [Int32] = []
    /// The connection's lifecycle (handshake, idle, keepalive, PING strikes, two-phase shutdown); its timers
    /// are armed here, indexed by `ServerConnectionStateMachine.Timer`.
    var lifecycle: ServerConnectionStateMachine
    var timers = [Scheduled<Void>?](repeating: nil, count: ServerConnectionStateMachine.Timer.allCases.count)
    var peer = "unknown"
    /// The peer's IP address (the key of the abuse penalty).
    var peerHost: String?

    /// Abuse limits: frames that cost work without carrying any, requests and bodies that never finish, and
    /// output a peer does not read (the decisions; the timers are here).
    var limits: ServerConnectionLimits
    var writeStallTimer: Scheduled<Void>?
    var bodyTimer: Scheduled<Void>?

    /// Output batching, not lifecycle: nghttp2 is parsing a read (its end flushes), a flush is queued.
    var inRead = false
    var flushScheduled = false

    init(
        router: GRPCRouter,
        configuration: GRPCServerConfiguration,
        logger: Logger,
        metrics: ServerMetrics,
        penalties: AbusePenalties? = nil
    ) {
        self.router = router
        self.configuration = configuration
        self.logger = logger
        self.metrics = metrics
        self.penalties = penalties
        self.limits = ServerConnectionLimits(configuration: .init(configuration), now: .now())
        self.lifecycle = ServerConnectionStateMachine(configuration: .init(configuration), now: .now())
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.executor = EventLoopTaskExecutor(context.eventLoop)
        if let address = context.channel.remoteAddress {
            self.peer = "\(address.ipAddress ?? "unix"):\(address.port ?? 0)"
            self.peerHost = address.ipAddress
        }
        do {
            let session = try HTTP2Session(role: .server, configuration: self.configuration.http2)
            session.delegate = self
            self.session = session
        } catch {
            self.logger.error("HTTP/2 session setup failed", metadata: ["error": "\(error)"])
            context.close(promise: nil)
            return
        }
        if context.channel.isActive { self.start(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        self.start(context: context)
        context.fireChannelActive()
    }

    private func start(context: ChannelHandlerContext) {
        guard self.session != nil, self.lifecycle.phase == .notStarted else { return }
        self.metrics.connectionOpened()
        self.flushOutput()
        self.perform(self.lifecycle.start(now: .now()))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = self.unwrapInboundIn(data)
        guard let session = self.session else { return }
        if let action = self.lifecycle.received(now: .now()) { self.perform(action) }
        self.inRead = true
        defer { self.inRead = false }
        do {
            try session.receive(bytes)
        } catch {
            // Bad preface, protocol violation or a flood nghttp2 detected: it has queued a GOAWAY.
            self.logger.debug("Closing connection after HTTP/2 error", metadata: ["error": "\(error)"])
            if error.isFlood, self.lifecycle.closeForAbuse() {
                self.recordAbuse(reason: "flood")
            } else {
                self.lifecycle.closeNow()
            }
            self.flushOutput()
            self.closeConnection()
            return
        }
        if self.lifecycle.phase == .closed {
            // The connection was closed during this read (abuse budget or PING strikes exhausted): GOAWAY is
            // queued, the rest of the input is not wanted.
            self.flushOutput()
            self.closeConnection()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        // While the peer does not take our output, read nothing more from it: whatever it sends (PINGs,
        // SETTINGS, requests) would only queue more output. nghttp2's ACK limit and the per-stream watermark
        // then bound what waits inside the session.
        let writable = context.channel.isWritable
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: writable)
        if writable {
            self.writeStallTimer?.cancel()
            self.writeStallTimer = nil
            self.flushOutput()
        } else if self.writeStallTimer == nil, let timeout = self.configuration.writeStallTimeout {
            self.writeStallTimer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(timeout)) { [self] in
                self.writeStallTimer = nil
                guard let context = self.context, !context.channel.isWritable else { return }
                self.timedOut(.writeStall)
                self.lifecycle.closeNow()
                self.closeConnection()
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.flushOutput()
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.teardown()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.logger.debug("Connection error", metadata: ["error": "\(error)"])
        self.closeConnection()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let shutdown = event as? ServerShutdownEvent {
            self.perform(self.lifecycle.beginGracefulShutdown(grace: TimeAmount(shutdown.grace), now: .now()))
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    private func teardown() {
        guard self.session != nil else { return }
        if self.lifecycle.phase != .notStarted { self.metrics.connectionClosed() }
        self.perform(self.lifecycle.channelClosed())
        self.writeStallTimer?.cancel()
        self.bodyTimer?.cancel()
        let calls = self.calls
        self.calls.removeAll()
        for call in calls.values {
            _ = call.state.streamClosed()
            self.cancel(call)
            call.connection = nil
        }
        self.session?.delegate = nil
        self.session = nil
        self.context = nil
    }

    func closeConnection() {
        guard let context = self.context else { return }
        context.close(promise: nil)
    }
}
