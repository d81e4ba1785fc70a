import Dispatch
import KindredGRPC
import KindredProto
import Logging
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Runs a gRPC server the way every Kindred server runs: with the health and reflection services, SERVING
/// once listening, and a graceful shutdown on SIGTERM or SIGINT (health NOT_SERVING, GOAWAY, in-flight calls
/// finish within `shutdownGrace`, then return).
public struct ServerRunner: Sendable {
    public var configuration: GRPCServerConfiguration
    public var services: [any GRPCService]
    public var shutdownGrace: Duration = .seconds(10)
    public let health = HealthService()
    /// The server's counters (calls, connections), shared with whoever renders them.
    public var metrics = ServerMetrics()
    /// The admin port (Prometheus `/metrics`, `/healthz`); nil = none.
    public var admin: AdminServer.Configuration?
    /// More Prometheus text appended to the runtime's counters (pool statistics, service counters).
    public var extraMetrics: [@Sendable () -> String] = []

    public init(configuration: GRPCServerConfiguration, services: [any GRPCService]) {
        self.configuration = configuration
        self.services = services
    }

    /// Everything `/metrics` shows: the runtime's counters, then each extra source.
    public func prometheusText() -> String {
        self.extraMetrics.reduce(self.metrics.prometheusText()) { $0 + $1() }
    }

    /// The admin server for `admin`, if configured (not started).
    public func makeAdminServer(logger: Logger) -> AdminServer? {
        guard let admin = self.admin else { return nil }
        let health = self.health
        return AdminServer(
            configuration: admin,
            logger: logger,
            metrics: { [self] in self.prometheusText() },
            healthy: { health.status(of: "") == true }
        )
    }

    /// Builds the server with the standard services added.
    public func makeServer(logger: Logger) -> GRPCServer {
        let names = self.services.map { service -> [String] in
            var router = GRPCRouter()
            service.register(in: &router)
            return router.serviceNames
        }.flatMap { $0 }
        let served = Set(names + ["grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"]).sorted()
        let standard: [any GRPCService] = [
            self.health,
            ReflectionService(version: .v1, files: ProtoRegistry.fileDescriptors, serviceNames: served),
            ReflectionService(version: .v1alpha, files: ProtoRegistry.fileDescriptors, serviceNames: served),
        ]
        let server = GRPCServer(
            configuration: self.configuration,
            services: self.services + standard,
            metrics: self.metrics,
            logger: logger
        )
        for name in names + ["grpc.health.v1.Health"] { self.health.setStatus(true, service: name) }
        return server
    }

    /// Starts the server, calls `onListening` with its address, and returns after a signal-driven shutdown.
    public func run(logger: Logger, onListening: @Sendable (SocketAddress) -> Void = { _ in }) async throws {
        let server = self.makeServer(logger: logger)
        let signals = SignalWaiter([SIGTERM, SIGINT])
        let address = try await server.start()
        let adminServer = self.makeAdminServer(logger: logger)
        do {
            try await adminServer?.start()
        } catch {
            await server.shutdown(grace: .zero)
            throw error
        }
        self.health.setStatus(true)
        onListening(address)
        let signal = await signals.wait()
        logger.notice("shutting down: health NOT_SERVING, draining calls", metadata: ["signal": "\(signal)"])
        self.health.setAll(false)
        await server.shutdown(grace: self.shutdownGrace)
        await adminServer?.stop()
        logger.notice("stopped")
    }
}

/// Waits for the first of some signals, with the default action switched off while waiting.
/// `@unchecked Sendable`: the dispatch sources are only kept alive here, never touched after `init`.
final class SignalWaiter: @unchecked Sendable {
    private let sources: [any DispatchSourceSignal]
    private let stream: AsyncStream<Int32>

    init(_ signals: [Int32]) {
        let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        self.stream = stream
        self.sources = signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            return source
        }
    }

    func wait() async -> Int32 {
        for await number in self.stream { return number }
        return 0
    }
}
