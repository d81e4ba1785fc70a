import KindredGRPC
import KindredGRPCServices
import KindredOpenSSL
import Logging
import NIOCore

/// The gateway process: the public API on the gRPC port (TLS or h2c), health and reflection, the admin port.
/// `gateway-server` is a thin wrapper around it; tests start it in-process.
public final class GatewayServer: Sendable {
    public let gateway: Gateway
    public let runner: ServerRunner
    private let logger: Logger

    public init(configuration: GatewayConfiguration, logger: Logger) throws {
        self.logger = logger
        self.gateway = try Gateway(configuration: configuration, logger: logger)
        var server = GRPCServerConfiguration()
        server.host = configuration.listen.host
        server.port = configuration.listen.port
        server.accessLogLevel = configuration.accessLog ? .info : nil
        // Clients on phones come and go: close connections idle for 5 minutes, recycle them after an hour.
        server.maxConnectionAge = .seconds(3600)
        if let certificate = configuration.tlsCertificateFile, let key = configuration.tlsKeyFile {
            server.tls = try TLSContext(configuration: .server(certificateChainFile: certificate, privateKeyFile: key))
        }
        var runner = ServerRunner(configuration: server, services: self.gateway.services)
        runner.admin = configuration.adminListen.map { AdminServer.Configuration(host: $0.host, port: $0.port) }
        let gateway = self.gateway
        runner.extraMetrics = [{ gateway.metrics.prometheusText() }]
        self.runner = runner
    }

    /// Serves until SIGTERM/SIGINT (then health NOT_SERVING, in-flight calls finish, exit).
    public func serve(onListening: @Sendable @escaping (SocketAddress) -> Void = { _ in }) async throws {
        let warmUp = Task { await self.gateway.warmUp() }
        defer { warmUp.cancel() }
        try await self.runner.run(logger: self.logger, onListening: onListening)
        await self.gateway.shutdown()
    }

    /// Starts the server without waiting for signals (tests); stop with `server.shutdown` then `shutdown()`.
    public func start() async throws -> (server: GRPCServer, address: SocketAddress) {
        let server = self.runner.makeServer(logger: self.logger)
        let address = try await server.start()
        self.runner.health.setStatus(true)
        await self.gateway.warmUp()
        _ = await self.gateway.waitForRevocations(timeout: .seconds(10))
        return (server, address)
    }

    public func shutdown() async {
        await self.gateway.shutdown()
    }
}
