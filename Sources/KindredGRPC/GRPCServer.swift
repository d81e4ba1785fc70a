import KindredOpenSSL
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A gRPC server: listens, serves the registered services on every connection, and shuts down gracefully.
public final class GRPCServer: Sendable {
    public let configuration: GRPCServerConfiguration
    public let metrics: ServerMetrics
    private let router: GRPCRouter
    private let group: any EventLoopGroup
    private let logger: Logger
    private let penalties: AbusePenalties?
    private let state = NIOLockedValueBox(State())

    private struct State {
        var listener: (any Channel)?
        var connections: [ObjectIdentifier: any Channel] = [:]
        var shuttingDown = false
    }

    public init(
        configuration: GRPCServerConfiguration,
        services: [any GRPCService],
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        metrics: ServerMetrics = ServerMetrics(),
        logger: Logger
    ) {
        self.metrics = metrics
        var router = GRPCRouter()
        for service in services { router.register(service) }
        self.configuration = configuration
        self.router = router
        self.group = group
        self.logger = logger
        self.penalties = configuration.abusePenalty.map { AbusePenalties(configuration: $0) }
    }

    /// Registered service names (e.g. for reflection and health).
    public var serviceNames: [String] { self.router.serviceNames }

    /// Binds the listening socket. Returns the bound address (useful with port 0).
    @discardableResult
    public func start() async throws -> SocketAddress {
        let configuration = self.configuration
        let router = self.router
        let logger = self.logger
        let metrics = self.metrics
        let penalties = self.penalties
        let bootstrap = ServerBootstrap(group: self.group)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let penalties {
                        try channel.pipeline.syncOperations.addHandler(
                            PenaltyGate(penalties: penalties, tarpit: configuration.abuseTarpit, metrics: metrics)
                        )
                    }
                }
            }
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: false)
            .childChannelInitializer { [weak self] channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls = configuration.tls {
                        try channel.pipeline.syncOperations.addHandler(TLSHandler(context: tls))
                    }
                    let http2 = {
                        ServerConnectionHandler(
                            router: router,
                            configuration: configuration,
                            logger: logger,
                            metrics: metrics,
                            penalties: penalties
                        )
                    }
                    if let http1 = configuration.web?.http1 {
                        // HTTP/2 or HTTP/1.1, as the first bytes say.
                        let sniffer = ProtocolSniffer(timeout: configuration.handshakeTimeout, metrics: metrics) { choice, sync in
                            switch choice {
                            case .http2:
                                try sync.addHandler(http2())
                            case .http1:
                                try http1.configure(sync)
                                try sync.addHandler(
                                    HTTP1CallHandler(router: router, configuration: configuration, logger: logger, metrics: metrics)
                                )
                            }
                        }
                        try channel.pipeline.syncOperations.addHandler(sniffer)
                    } else {
                        try channel.pipeline.syncOperations.addHandler(http2())
                    }
                    self?.track(channel)
                }
            }
        let listener = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
        self.state.withLockedValue { $0.listener = listener }
        let address = listener.localAddress!
        self.logger.info(
            "gRPC server listening",
            metadata: ["address": "\(address)", "tls": "\(configuration.tls != nil)"]
        )
        return address
    }

    /// The bound address, once started.
    public var localAddress: SocketAddress? {
        self.state.withLockedValue { $0.listener?.localAddress }
    }

    private func track(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        let accepted = self.state.withLockedValue { state -> Bool in
            guard !state.shuttingDown else { return false }
            state.connections[id] = channel
            return true
        }
        guard accepted else {
            channel.close(promise: nil)
            return
        }
        channel.closeFuture.whenComplete { [weak self] _ in
            _ = self?.state.withLockedValue { $0.connections.removeValue(forKey: id) }
        }
    }

    /// Stops accepting, sends GOAWAY on every connection, lets in-flight calls finish for up to `grace`,
    /// then closes what is left. Returns when every connection is closed.
    public func shutdown(grace: Duration = .seconds(10)) async {
        let (listener, connections) = self.state.withLockedValue { state in
            state.shuttingDown = true
            return (state.listener, Array(state.connections.values))
        }
        try? await listener?.close()
        for channel in connections {
            channel.pipeline.fireUserInboundEventTriggered(ServerShutdownEvent(grace: grace))
        }
        for channel in connections {
            try? await channel.closeFuture.get()
        }
        self.logger.info("gRPC server stopped")
    }
}

/// Holds or refuses connections from penalised addresses as they are accepted, before NIO registers them with an
/// event loop or any TLS or HTTP/2 work. Held connections (the tarpit, see `AbuseTarpit`) are never read nor
/// answered and are closed when their address's penalty ends: a reconnecting flood then waits on its connection
/// instead of costing the machine thousands of refused connections a second. Confined to the listener's loop.
private final class PenaltyGate: ChannelInboundHandler {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel

    private let penalties: AbusePenalties
    private let metrics: ServerMetrics
    private var tarpit: AbuseTarpit?
    /// Held connections and the timers that close them.
    private var held: [ObjectIdentifier: (channel: any Channel, timer: Scheduled<Void>)] = [:]

    init(penalties: AbusePenalties, tarpit: AbuseTarpit.Configuration?, metrics: ServerMetrics) {
        self.penalties = penalties
        self.tarpit = tarpit.map { AbuseTarpit(configuration: $0) }
        self.metrics = metrics
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let accepted = self.unwrapInboundIn(data)
        guard let host = accepted.remoteAddress?.ipAddress else {
            context.fireChannelRead(data)
            return
        }
        let now = NIODeadline.now()
        let blockedUntil = self.penalties.blockedUntil(host, now: now)
        let decision: AbuseTarpit.Decision
        if var tarpit = self.tarpit {
            decision = tarpit.admit(blockedUntil: blockedUntil, now: now)
            self.tarpit = tarpit
        } else {
            decision = blockedUntil == nil ? .accept : .refuse
        }
        switch decision {
        case .accept:
            context.fireChannelRead(data)
        case .refuse:
            self.metrics.connectionRefused()
            accepted.close(promise: nil)
        case .hold(let until):
            self.metrics.connectionTarpitted()
            let id = ObjectIdentifier(accepted)
            let timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: until) { [self] in
                self.release(id)
            }
            self.held[id] = (accepted, timer)
        }
    }

    private func release(_ id: ObjectIdentifier) {
        guard let entry = self.held.removeValue(forKey: id) else { return }
        entry.timer.cancel()
        entry.channel.close(promise: nil)
        self.tarpit?.release()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // The listener closed (shutdown): let the held connections go.
        for id in Array(self.held.keys) { self.release(id) }
        context.fireChannelInactive()
    }
}
