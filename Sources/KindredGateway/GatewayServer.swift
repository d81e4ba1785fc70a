import KindredGRPC
import KindredGRPCServices
import KindredOpenSSL
import KindredServiceKit
import Logging
import NIOCore

/// The gateway process: the public API on the gRPC port (TLS or h2c), health and reflection, the admin port.
/// `gateway-server` is a thin wrapper around it; tests start it in-process.
public final class GatewayServer: ServiceServer {
    public let gateway: Gateway
    public let runner: ServerRunner
    private let logger: Logger

    public init(configuration: GatewayConfiguration, logger: Logger) throws {
        self.logger = logger
        let metrics = ServerMetrics()
        self.gateway = try Gateway(configuration: configuration, metricsFactory: metrics.factory, logger: logger)
        var server = try configuration.endpoint.serverConfiguration()
        // Clients on phones come and go: close connections idle for 5 minutes, recycle them after an hour.
        server.maxConnectionAge = .seconds(3600)
        // UploadPhoto streams 1 MiB chunks: a 4 MiB stream window keeps several in flight together over a slow
        // link instead of one per window update (ProfileServer sets the same).
        server.http2.initialStreamWindowSize = 4 << 20
        // The public API speaks gRPC-Web and Connect too, for browsers and curl (the same handlers and limits).
        server.web = .gateway(configuration, metrics: HTTP1PortMetrics(port: "web", factory: metrics.factory))
        // Apps' trace contexts are linked, not continued: an app's `sampled` flag does not make the cluster trace
        // every call it makes, and the cluster's sampler alone decides.
        server.callerTrace = .linked
        var runner = ServerRunner(configuration: server, services: self.gateway.services)
        runner.admin = configuration.endpoint.adminConfiguration
        runner.metrics = metrics
        let gateway = self.gateway
        // Auth's public keys fetched at start; auth's session ends followed for as long as the gateway serves.
        runner.background = gateway.backgroundTasks
        self.runner = runner
    }

    /// Starts the server without waiting for signals (tests), once auth's keys are fetched and session ends
    /// followed (or after 10 s); stop it with
    /// `stop()` on the result, then `shutdown()`.
    public func start() async throws -> RunningServer {
        let running = try await self.runner.start(logger: self.logger)
        _ = await self.gateway.waitUntilReady(timeout: .seconds(10))
        return running
    }

    public func shutdown() async {
        await self.gateway.shutdown()
    }
}

/// The gateway as the generic server command runs it: `gateway-server serve | migrate | healthcheck`.
public enum GatewayServerDefinition: ServerDefinition {
    public static let name = "gateway"
    public static let summary = "The Kindred gateway: the public gRPC API in front of the services."
    public static let defaultPort = 50050
    public static let schema: String? = nil

    public static func makeServer(settings: EnvironmentReader, logger: Logger) async throws -> GatewayServer {
        try GatewayServer(configuration: GatewayConfiguration(settings), logger: logger)
    }
}
