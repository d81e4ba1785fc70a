import KindredGRPC
import KindredProto
import Logging
import NIOCore
import ServiceLifecycle
import UnixSignals

/// Runs a gRPC server the way every Kindred server runs: with the health and reflection services, the admin
/// port, and the server's background loops (relays, watchers), all under one swift-service-lifecycle
/// `ServiceGroup`. They start in order — admin port, background loops, gRPC server — and on SIGTERM or SIGINT
/// stop in reverse: health NOT_SERVING, GOAWAY, in-flight calls finish within `shutdownGrace`, then the
/// background loops stop (so what the last calls queued is still being delivered while they drain), then
/// the admin port.
public struct ServerRunner: Sendable {
    public var configuration: GRPCServerConfiguration
    public var services: [any GRPCService]
    public var shutdownGrace: Duration = .seconds(10)
    public let health = HealthService()
    /// The server's metrics backend and the runtime's counters (calls, connections). Everything else of the
    /// server (services, pools, relays) records into `metrics.factory`, so one `/metrics` shows it all. By
    /// default a private Prometheus registry; a process that bootstrapped `MetricsSystem` with another backend
    /// before building the runner records there instead (see `ServerMetrics`).
    public var metrics = ServerMetrics()
    /// The admin port (Prometheus `/metrics`, `/healthz`); nil = none.
    public var admin: AdminServer.Configuration?
    /// More Prometheus text appended to the registry's, for numbers not recorded through swift-metrics.
    public var extraMetrics: [@Sendable () -> String] = []
    /// How often the `metrics-sampler` loop copies sampled values (pool statistics, feed state) into a
    /// backend nobody scrapes through the admin port (`MetricsSystem` bootstrapped with another backend).
    /// With the default Prometheus registry, samplers run at each scrape instead and there is no loop.
    public var samplingInterval: Duration = .seconds(10)
    /// Loops that run beside the gRPC server for as long as it serves (mail and event relays, watchers).
    /// Each is cancelled after the gRPC server has drained; one that ends or fails by itself stops the server.
    public var background: [BackgroundTask] = []
    /// Called when the graceful shutdown starts, after health went NOT_SERVING and before the drain: end
    /// long-lived streams (watch streams) here, so the drain does not wait the whole grace period for them.
    public var beforeDrain: [@Sendable () -> Void] = []

    public init(configuration: GRPCServerConfiguration, services: [any GRPCService]) {
        self.configuration = configuration
        self.services = services
    }

    /// Everything `/metrics` shows: the server's registry (after running the samplers), then each extra source.
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
            metricsFactory: self.metrics.factory,
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

    /// The lifecycle services in start order: admin port, background loops, gRPC server.
    public func lifecycleServices(
        logger: Logger,
        onListening: @escaping @Sendable (SocketAddress) -> Void = { _ in }
    ) -> [ServiceGroupConfiguration.ServiceConfiguration] {
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        ProcessMemory.attach(to: self.metrics)
        if let admin = self.makeAdminServer(logger: logger) {
            services.append(.init(service: AdminPortService(server: admin)))
        }
        for task in self.background {
            services.append(.init(service: task))
        }
        if self.metrics.registry == nil && self.metrics.hasSamplers {
            let (metrics, interval) = (self.metrics, self.samplingInterval)
            services.append(
                .init(
                    service: BackgroundTask("metrics-sampler") {
                        while true {
                            metrics.sample()
                            try await Task.sleep(for: interval)
                        }
                    }
                )
            )
        }
        let server = GRPCServerService(
            server: self.makeServer(logger: logger),
            health: self.health,
            grace: self.shutdownGrace,
            beforeDrain: self.beforeDrain,
            logger: logger,
            onListening: onListening
        )
        services.append(.init(service: server))
        return services
    }

    /// The service group that runs everything; `signals` start its graceful shutdown (tests pass none and call
    /// `triggerGracefulShutdown()`).
    public func makeServiceGroup(
        logger: Logger,
        signals: [UnixSignal] = [.sigterm, .sigint],
        onListening: @escaping @Sendable (SocketAddress) -> Void = { _ in }
    ) -> ServiceGroup {
        ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: self.lifecycleServices(logger: logger, onListening: onListening),
                gracefulShutdownSignals: signals,
                logger: logger
            )
        )
    }

    /// Starts everything, calls `onListening` with the gRPC address, and returns after a signal-driven
    /// shutdown (SIGTERM or SIGINT). Throws what made a service fail (a port in use, a loop that crashed).
    public func run(logger: Logger, onListening: @escaping @Sendable (SocketAddress) -> Void = { _ in }) async throws {
        try await self.makeServiceGroup(logger: logger, onListening: onListening).run()
        logger.notice("stopped")
    }
}

extension ServerRunner {
    /// Starts everything `run` runs, without signal handling (tests, in-process use), and returns once the gRPC
    /// server listens. Throws what stopped the start (a port in use...).
    public func start(logger: Logger) async throws -> RunningServer {
        let (addresses, continuation) = AsyncThrowingStream.makeStream(of: SocketAddress.self)
        let group = self.makeServiceGroup(logger: logger, signals: []) { continuation.yield($0) }
        let task = Task {
            do {
                try await group.run()
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
                throw error
            }
        }
        guard let address = try await addresses.first(where: { _ in true }) else {
            throw BackgroundTaskEnded(name: "grpc-server")
        }
        return RunningServer(address: address, group: group, task: task)
    }
}

/// A server started by `ServerRunner.start`: stop it with `stop()` (the same graceful shutdown as SIGTERM).
public struct RunningServer: Sendable {
    /// Where the gRPC server listens.
    public let address: SocketAddress
    fileprivate let group: ServiceGroup
    fileprivate let task: Task<Void, any Error>

    /// The gRPC port (convenience for tests).
    public var port: Int { self.address.port ?? 0 }

    /// Drains calls, stops the background loops and the admin port, and waits until all of it is done.
    public func stop() async {
        await self.group.triggerGracefulShutdown()
        _ = try? await self.task.value
    }
}

/// Work that runs beside a server: a loop until it is cancelled (a relay, a watcher), or a one-off step at start
/// (`once`). A loop's `run` must return soon after its task is cancelled.
public struct BackgroundTask: Service, CustomStringConvertible {
    public let name: String
    private let body: @Sendable () async throws -> Void

    /// A loop that runs until the server stops.
    public init(_ name: String, _ body: @escaping @Sendable () async throws -> Void) {
        self.name = name
        self.body = body
    }

    /// A step that runs once when the server starts and may finish early (a warm-up).
    public static func once(_ name: String, _ body: @escaping @Sendable () async throws -> Void) -> BackgroundTask {
        BackgroundTask(name) {
            try await body()
            try await gracefulShutdown()
        }
    }

    public var description: String { self.name }

    public func run() async throws {
        // A graceful shutdown cancels the loop; a loop that returns on its own before that is a failure of the
        // server (ServiceGroup then stops everything), since nothing would do its work any more.
        do {
            try await cancelWhenGracefulShutdown { try await self.body() }
        } catch is CancellationError where Task.isShuttingDownGracefully || Task.isCancelled {
            return
        }
        if !Task.isShuttingDownGracefully && !Task.isCancelled {
            throw BackgroundTaskEnded(name: self.name)
        }
    }
}

/// A background loop ended while the server was still serving.
public struct BackgroundTaskEnded: Error, CustomStringConvertible {
    public let name: String
    public var description: String { "background task \(self.name) ended while the server was serving" }
}

/// The gRPC server as a lifecycle service: serves until the graceful shutdown, then health NOT_SERVING, GOAWAY
/// and drain within `grace` (no grace when the group is cancelled instead).
struct GRPCServerService: Service, CustomStringConvertible {
    let server: GRPCServer
    let health: HealthService
    let grace: Duration
    let beforeDrain: [@Sendable () -> Void]
    let logger: Logger
    let onListening: @Sendable (SocketAddress) -> Void

    var description: String { "grpc-server" }

    func run() async throws {
        let address = try await self.server.start()
        self.health.setStatus(true)
        self.onListening(address)
        let graceful: Bool
        do {
            try await gracefulShutdown()
            graceful = true
        } catch {
            graceful = false
        }
        self.logger.notice("shutting down: health NOT_SERVING, draining calls")
        self.health.setAll(false)
        for hook in self.beforeDrain { hook() }
        await self.server.shutdown(grace: graceful ? self.grace : .zero)
    }
}

/// The admin HTTP port as a lifecycle service: up until the graceful shutdown.
struct AdminPortService: Service, CustomStringConvertible {
    let server: AdminServer

    var description: String { "admin-port" }

    func run() async throws {
        _ = try await self.server.start()
        try? await gracefulShutdown()
        await self.server.stop()
    }
}
