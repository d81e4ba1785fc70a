import KindredGRPC
import NIOCore
import NIOHTTP1
import NIOPosix

/// Binds a plain HTTP/1.1 port under `HTTP1Limits`: NIO's server pipeline (keep-alive, one request at a time),
/// a deadline on every phase of a connection (`HTTP1ConnectionTimer`), no reading while the output is blocked
/// (NIO's `BackPressureHandler`, so a client that does not read its answers cannot queue more of them), and a
/// cap on open connections enforced as they are accepted. `makeHandler` builds the port's own handler
/// (`HTTPServerRequestPart` in, `HTTPServerResponsePart` out) for each connection.
public enum HTTP1Port {
    public static func bind(
        host: String,
        port: Int,
        limits: HTTP1Limits,
        metrics: HTTP1PortMetrics,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        makeHandler: @escaping @Sendable () -> any ChannelHandler
    ) async throws -> any Channel {
        let slots = HTTP1ConnectionSlots(limit: limits.maxConnections, metrics: metrics)
        return try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(HTTP1ConnectionCap(slots: slots))
                }
            }
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try Self.configure(sync, limits: limits, metrics: metrics)
                    try sync.addHandler(makeHandler())
                }
            }
            .bind(host: host, port: port)
            .get()
    }

    /// Largest request header block, in bytes (the HTTP/2 ports' header list limit): larger ones are answered
    /// 431 and the connection closed.
    public static let maxHeaderListSize = 16 << 10

    /// The HTTP/1.1 layer of every plain HTTP port, appended to a connection's pipeline: NIO's request decoder
    /// (llhttp: a Content-Length beside Transfer-Encoding, obs-fold, bad chunk sizes and other smuggling shapes
    /// are refused with 400 and the connection closed, and so is an HTTP/1.0 request with Transfer-Encoding,
    /// `HTTP10FramingGuard`; header block ≤ `maxHeaderListSize`), keep-alive and
    /// pipelining in order, a deadline on every phase (`HTTP1ConnectionTimer`), and no reading while the output
    /// is blocked. The port's own handler goes after it.
    public static func configure(
        _ sync: ChannelPipeline.SynchronousOperations,
        limits: HTTP1Limits,
        metrics: HTTP1PortMetrics
    ) throws {
        let deadlines = HTTP1DeadlineHandler(limits: limits, metrics: metrics)
        var decoderLimits = NIOHTTPDecoderLimitConfiguration()
        decoderLimits.maxHeaderListSize = Self.maxHeaderListSize
        decoderLimits.maxHeaderFieldSize = Self.maxHeaderListSize
        try sync.addHandler(HTTP1ByteWatcher(deadlines: deadlines))
        try sync.addHandler(BackPressureHandler())
        try sync.configureHTTPServerPipeline(
            withErrorHandling: true,
            withEncoderConfiguration: HTTPResponseEncoder.Configuration(),
            withDecoderLimitConfiguration: decoderLimits
        )
        try sync.addHandler(HTTP10FramingGuard())
        try sync.addHandler(deadlines)
    }

    /// The same layer for a gRPC server that serves the web protocols over HTTP/1.1 too (`WebProtocols.http1`).
    /// Connections are accepted by the gRPC server and become HTTP/1.1 once their first bytes say so; from then on
    /// they count against `limits.maxConnections` (`http_connections_open{port}`), and one past the cap is closed
    /// before its request is read (`http_connections_refused_total{port}`).
    public static func layer(limits: HTTP1Limits, metrics: HTTP1PortMetrics) -> WebProtocols.HTTP1Layer {
        let slots = HTTP1ConnectionSlots(limit: limits.maxConnections, metrics: metrics)
        return WebProtocols.HTTP1Layer { sync in
            try sync.addHandler(HTTP1ConnectionCount(slots: slots))
            try Self.configure(sync, limits: limits, metrics: metrics)
        }
    }
}

/// Closes accepted connections past the cap before they are registered with an event loop (nothing is read or
/// written on them). Runs on the listener's loop; the count is shared with the connections' loops, which lower it
/// as they close.
private final class HTTP1ConnectionCap: ChannelInboundHandler {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel

    private let slots: HTTP1ConnectionSlots

    init(slots: HTTP1ConnectionSlots) {
        self.slots = slots
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let accepted = self.unwrapInboundIn(data)
        guard self.slots.take() else {
            accepted.close(promise: nil)
            return
        }
        let slots = self.slots
        accepted.closeFuture.whenComplete { _ in slots.giveBack() }
        context.fireChannelRead(data)
    }
}

/// Counts a connection that turned out to be HTTP/1.1 on a port that accepts several protocols, against the cap:
/// one past it is closed as soon as it is known (the sniffer adds this handler when the first bytes arrive).
private final class HTTP1ConnectionCount: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let slots: HTTP1ConnectionSlots
    private var counted = false

    init(slots: HTTP1ConnectionSlots) {
        self.slots = slots
    }

    func handlerAdded(context: ChannelHandlerContext) {
        guard self.slots.take() else {
            context.close(promise: nil)
            return
        }
        self.counted = true
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        guard self.counted else { return }
        self.counted = false
        self.slots.giveBack()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A refused connection reads nothing more.
        if self.counted { context.fireChannelRead(data) }
    }
}

/// First in the pipeline: tells the deadlines that bytes arrived (a kept-alive connection's next request began),
/// which the HTTP decoder shows only once a whole header is in.
private final class HTTP1ByteWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let deadlines: HTTP1DeadlineHandler

    init(deadlines: HTTP1DeadlineHandler) {
        self.deadlines = deadlines
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.deadlines.bytesReceived()
        context.fireChannelRead(data)
    }
}

/// Keeps the connection's one timer at the deadline of its current phase and closes the connection when it
/// passes. Sits between NIO's HTTP server handlers and the port's handler, so it sees decoded request parts in and
/// response parts out.
private final class HTTP1DeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let limits: HTTP1Limits
    private let metrics: HTTP1PortMetrics
    private var timer: HTTP1ConnectionTimer?
    private var scheduled: Scheduled<Void>?
    private var armedFor: NIODeadline?
    /// This handler's context while it is in the pipeline (the byte watcher's events arrive without it).
    private var context: ChannelHandlerContext?

    init(limits: HTTP1Limits, metrics: HTTP1PortMetrics) {
        self.limits = limits
        self.metrics = metrics
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { self.start(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        self.start(context: context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.scheduled?.cancel()
        self.scheduled = nil
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.scheduled?.cancel()
        self.scheduled = nil
        context.fireChannelInactive()
    }

    func bytesReceived() {
        guard let context = self.context else { return }
        self.update(context: context) { $0.bytesReceived(now: .now()) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head: self.update(context: context) { $0.headReceived(now: .now()) }
        case .body: break
        case .end: self.update(context: context) { $0.requestEnded() }
        }
        context.fireChannelRead(data)
    }

    /// A request the decoder refuses (NIO's error handler has answered 400 with `Connection: close`) or any other
    /// error ends the connection here, whatever the port's handler does: left open, the decoder read the rest of
    /// the bytes again and a second 400 followed (found by Tests/Fuzz's FuzzHTTP1).
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
        context.fireErrorCaught(error)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = self.unwrapOutboundIn(data) {
            self.update(context: context) { $0.responseEnded(now: .now()) }
        }
        context.write(data, promise: promise)
    }

    private func start(context: ChannelHandlerContext) {
        guard self.timer == nil else { return }
        self.timer = HTTP1ConnectionTimer(limits: self.limits, openedAt: .now())
        self.arm(context: context)
    }

    private func update(context: ChannelHandlerContext, _ event: (inout HTTP1ConnectionTimer) -> Void) {
        guard var timer = self.timer else { return }
        event(&timer)
        self.timer = timer
        if timer.deadline != self.armedFor { self.arm(context: context) }
    }

    /// One scheduled task at the current deadline (replaced when the deadline moves).
    private func arm(context: ChannelHandlerContext) {
        self.scheduled?.cancel()
        self.scheduled = nil
        self.armedFor = self.timer?.deadline
        guard let deadline = self.armedFor else { return }
        self.scheduled = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            self.fire(context: context)
        }
    }

    private func fire(context: ChannelHandlerContext) {
        self.scheduled = nil
        guard let timeout = self.timer?.expired(now: .now()) else {
            self.arm(context: context)
            return
        }
        self.timer = nil
        self.metrics.timedOut(timeout)
        context.close(promise: nil)
    }
}
