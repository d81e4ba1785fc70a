import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredPostgres
import KindredServiceKit
import Logging

/// The whole discovery service, built from a configuration: database pool, auth connection (keys, session ends,
/// service token), the in-memory index (rebuilt from PostgreSQL at start) and the gRPC server.
/// `discovery-server` is a thin wrapper around it; tests start it through `TestServer`.
public final class DiscoveryServer: ServiceServer {
    public let configuration: DiscoveryConfiguration
    public let database: PostgresClient
    public let service: DiscoveryService
    public let auth: AuthConnection
    public let runner: ServerRunner
    /// Whether `auth` was made here (and is closed by ``shutdown()``) rather than passed in.
    private let ownsAuth: Bool
    private let profileClient: GRPCClient

    /// `auth`: how callers are checked; nil = connect to `configuration.auth.address` (tests pass fixed keys).
    public init(configuration: DiscoveryConfiguration, auth: AuthConnection? = nil, logger: Logger) throws {
        self.configuration = configuration
        self.database = try configuration.database.makeClient(logger: logger)
        self.ownsAuth = auth == nil
        self.auth = auth ?? AuthConnection(settings: configuration.auth, serviceName: "discovery", logger: logger)
        var profile = GRPCClientConfiguration(address: configuration.profileAddress)
        profile.defaultTimeout = .seconds(30)
        profile.connectTimeout = .seconds(2)
        self.profileClient = GRPCClient(configuration: profile, logger: logger)
        let metrics = ServerMetrics()
        self.service = DiscoveryService(
            configuration: configuration, database: self.database, auth: self.auth, profile: self.profileClient,
            metricsFactory: metrics.factory, logger: logger)
        var runner = ServerRunner(configuration: try configuration.endpoint.serverConfiguration(), services: [self.service])
        runner.admin = configuration.endpoint.adminConfiguration
        runner.metrics = metrics
        PostgresPoolMetrics.attach(pool: "discovery", database: self.database, to: metrics)
        runner.background = self.auth.backgroundTasks
        let service = self.service
        // The index is built from PostgreSQL before decks are meaningful; until then the viewer is "not indexed".
        runner.background.append(
            .once("index-rebuild") {
                var delay: Duration = .milliseconds(200)
                while !Task.isCancelled {
                    do {
                        _ = try await service.rebuild(community: nil)
                        return
                    } catch {
                        logger.error("index rebuild failed, retrying", metadata: ["error.type": "\(type(of: error))"])
                        try? await Task.sleep(for: delay)
                        delay = min(delay * 2, .seconds(10))
                    }
                }
            })
        runner.background.append(self.service.inbox.purgeTask())
        if let bus = JetStreamEventConsumer.backgroundTask(
            consumer: configuration.eventConsumer, producers: DiscoveryService.eventProducers,
            settings: configuration.eventBus, logger: logger,
            apply: { [service] in try await service.applyEvents($0, from: $1) })
        {
            runner.background.append(bus)
        }

        self.runner = runner
    }

    public func shutdown() async {
        await self.database.shutdown()
        if self.ownsAuth { await self.auth.shutdown() }
        await self.profileClient.close()
    }
}

/// The discovery service as the generic server command runs it: `discovery-server serve | migrate |
/// healthcheck`, settings from `KINDRED_DISCOVERY_*` (services/discovery/README.md).
public enum DiscoveryServerDefinition: ServerDefinition {
    public static let name = "discovery"
    public static let summary = "The Kindred discovery service: decks, recommendations and member search."
    public static let defaultPort = 50053
    public static let schema: String? = "discovery"

    public static func makeServer(settings: EnvironmentReader, logger: Logger) async throws -> DiscoveryServer {
        try DiscoveryServer(configuration: DiscoveryConfiguration(settings), logger: logger)
    }
}
