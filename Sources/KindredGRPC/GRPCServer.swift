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
                        try channel.pipeline.syncOperations.addHandler(PenaltyGate(penalties: penalties, metrics: metrics))
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
                    try channel.pipeline.syncOperations.addHandler(
                        ServerConnectionHandler(
                            router: router,
                            configuration: configuration,
                            logger: logger,
                            metrics: metrics,
                            penalties: penalties
                        )
                    )
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

/// Refuses connections from penalised addresses as they are accepted, before NIO registers them with an event
/// loop or any TLS or HTTP/2 work: a reconnecting flood then costs the server an accept and a close.
private final class PenaltyGate: ChannelInboundHandler {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel

    private let penalties: AbusePenalties
    private let metrics: ServerMetrics

    init(penalties: AbusePenalties, metrics: ServerMetrics) {
        self.penalties = penalties
        self.metrics = metrics
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let accepted = self.unwrapInboundIn(data)
        if let host = accepted.remoteAddress?.ipAddress, self.penalties.isBlocked(host) {
            self.metrics.connectionRefused()
            accepted.close(promise: nil)
            return
        }
        context.fireChannelRead(data)
    }
}
