import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredOpenSSL
import KindredPostgres
import KindredServiceKit
import Logging

/// The whole match service, built from a configuration: database pool, auth connection (keys, session ends,
/// service token), the swipe writer, the events relay and the gRPC server. `match-server` is a thin wrapper
/// around it; tests start it in-process through `TestServer<MatchServerDefinition>`.
public final class MatchServer: ServiceServer {
    public let configuration: MatchConfiguration
    public let database: PostgresClient
    public let service: MatchService
    public let auth: AuthConnection
    /// Delivers match's events to the configured consumers; nil when none is configured.
    public let eventRelay: OutboxRelay?
    public let runner: ServerRunner
    /// Whether `auth` was made here (and is closed by ``shutdown()``) rather than passed in.
    private let ownsAuth: Bool
    /// The client of discovery's CheckCandidates, when the check was made here.
    private let discoveryClient: DiscoveryCandidates?

    /// `auth`: how callers are checked; nil = connect to `configuration.auth.address` (tests pass fixed keys).
    /// `candidateCheck`: who a swiper's deck could show; nil = discovery at `configuration.discoveryAddress`.
    public init(
        configuration: MatchConfiguration, auth: AuthConnection? = nil, candidateCheck: (any CandidateCheck)? = nil,
        logger: Logger
    ) throws {
        self.configuration = configuration
        self.database = try configuration.database.makeClient(logger: logger)
        self.ownsAuth = auth == nil
        self.auth = auth ?? AuthConnection(settings: configuration.auth, serviceName: "match", logger: logger)
        var check = candidateCheck
        if check == nil {
            let discovery = DiscoveryCandidates(
                addresses: configuration.discoveryShardAddresses ?? [configuration.discoveryAddress], tokens: self.auth.serviceTokens,
                timeout: configuration.discoveryTimeout, logger: logger)
            self.discoveryClient = discovery
            check = DiscoveryCandidateCheck(discovery, includingLikers: false, unavailable: MatchError.swipingUnavailable)
        } else {
            self.discoveryClient = nil
        }
        let metrics = ServerMetrics()
        self.service = MatchService(
            configuration: configuration,
            database: self.database,
            auth: self.auth,
            candidateCheck: check!,
            metricsFactory: metrics.factory,
            logger: logger
        )
        self.eventRelay = OutboxRelay(
            producer: "match", settings: configuration.events, database: self.database,
            tokens: self.auth.serviceTokens, metricsFactory: metrics.factory, logger: logger)
        var runner = ServerRunner(configuration: try configuration.endpoint.serverConfiguration(), services: [self.service])
        runner.admin = configuration.endpoint.adminConfiguration
        runner.metrics = metrics
        PostgresPoolMetrics.attach(pool: "match", database: self.database, to: metrics)
        runner.background = self.auth.backgroundTasks
        runner.background.append(self.service.inbox.purgeTask())
        let matchService = self.service
        if let bus = JetStreamEventConsumer.backgroundTask(
            consumer: "match", producers: MatchService.eventProducers, settings: configuration.events.bus, logger: logger,
            apply: { [matchService] in try await matchService.applyEvents($0, from: $1) })
        {
            runner.background.append(bus)
        }

        if let events = self.eventRelay {
            runner.background.append(BackgroundTask("events-relay") { await events.run() })
        }
        self.runner = runner
    }

    public func shutdown() async {
        await self.database.shutdown()
        if self.ownsAuth { await self.auth.shutdown() }
        await self.discoveryClient?.close()
    }
}

/// The match service as the generic server command runs it: `match-server serve | migrate | healthcheck`,
/// settings from `KINDRED_MATCH_*` (services/match/README.md).
public enum MatchServerDefinition: ServerDefinition {
    public static let name = "match"
    public static let summary = "The Kindred match service: swipes, matches, follows, blocks and reports."
    public static let defaultPort = 50054
    public static let schema: String? = "match"

    public static func makeServer(settings: EnvironmentReader, logger: Logger) async throws -> MatchServer {
        try MatchServer(configuration: MatchConfiguration(settings), logger: logger)
    }
}
