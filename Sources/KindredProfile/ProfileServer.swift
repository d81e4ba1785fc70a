import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredOpenSSL
import KindredPostgres
import KindredProto
import KindredServiceKit
import Logging

/// The whole profile service, built from a configuration: database pool, auth client (keys, session ends, service
/// token), photo store and workers, the two gRPC services and the events relay. `profile-server` is a thin
/// wrapper around it; tests start it in-process (TestServer).
public final class ProfileServer: ServiceServer {
    public let configuration: ProfileConfiguration
    public let database: PostgresClient
    /// The standby for other members' cards, when `KINDRED_PROFILE_READ_DATABASE_URL` is set.
    public let standby: StandbyReads?
    public let runner: ServerRunner
    public let blobs: any PhotoBlobStorage
    let profiles: ProfileService
    let workers: PhotoWorkers
    /// Auth's keys, session ends and profile's service token (the kit's AuthConnection).
    private let auth: AuthConnection
    /// The client of discovery's CheckCandidates, when the card check was made here.
    private let discoveryClient: DiscoveryCandidates?
    private let logger: Logger

    /// `cardCheck`: whose cards a viewer may see as far as preferences go; nil = discovery at
    /// `configuration.discoveryAddress` (tests pass their own).
    public init(configuration: ProfileConfiguration, cardCheck: (any CandidateCheck)? = nil, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        self.database = try configuration.database.makeClient(logger: logger)
        let auth = AuthConnection(settings: configuration.auth, serviceName: "profile", logger: logger)
        self.auth = auth
        let access = auth.access
        let tokens = auth.serviceTokens
        var check = cardCheck
        if check == nil {
            let discovery = DiscoveryCandidates(
                addresses: configuration.discoveryShardAddresses ?? [configuration.discoveryAddress], tokens: tokens, timeout: configuration.discoveryTimeout,
                logger: logger)
            self.discoveryClient = discovery
            check = DiscoveryCandidateCheck(discovery, includingLikers: true, unavailable: ProfileError.profilesUnavailable)
        } else {
            self.discoveryClient = nil
        }

        if let directory = configuration.photoDirectory {
            self.blobs = try FolderPhotoBlobStorage(root: directory)
        } else {
            self.blobs = PostgresPhotoBlobStore(database: self.database)
        }
        self.workers = PhotoWorkers(threads: configuration.photoWorkers, maxQueued: configuration.photoWorkers * 4)
        // Page tokens are signed with a key derived from profile's service secret: good at every replica and
        // after a restart.
        let pageTokenKey = PageToken.key(service: "profile", secret: configuration.auth.serviceSecret)
        let metrics = ServerMetrics()
        self.standby = try configuration.database.makeStandbyReads(
            primary: self.database, metricsFactory: metrics.factory, logger: logger)
        self.profiles = ProfileService(
            configuration: configuration, database: self.database, access: access, cardCheck: check!,
            blobs: self.blobs, photoWorkers: self.workers, pageTokenKey: pageTokenKey, standby: self.standby,
            metricsFactory: metrics.factory, logger: logger)
        let communities = CommunityService(database: self.database, access: access, pageTokenKey: pageTokenKey)

        var server = try configuration.endpoint.serverConfiguration()
        // UploadPhoto chunks are up to 1 MiB: a stream window of several chunks keeps them in flight together
        // over a slow link instead of one per window update.
        server.http2.initialStreamWindowSize = 4 << 20
        var runner = ServerRunner(configuration: server, services: [communities, self.profiles])
        runner.admin = configuration.endpoint.adminConfiguration
        runner.metrics = metrics
        _ = PostgresPoolMetrics.attach(pool: "profile", database: self.database, to: metrics)
        runner.background = auth.backgroundTasks
        if let relay = OutboxRelay(
            producer: "profile", settings: configuration.events, database: self.database, tokens: tokens,
            metricsFactory: metrics.factory, logger: logger)
        {
            runner.background.append(BackgroundTask("events-relay") { await relay.run() })
        }
        let profiles = self.profiles
        runner.background.append(
            BackgroundTask("community-resnapshots") {
                while !Task.isCancelled {
                    var announced = 0
                    do {
                        announced = try await profiles.resnapshotNextBatch()
                    } catch {
                        logger.warning("community re-announcement batch failed", metadata: ["error.type": "\(type(of: error))"])
                    }
                    if announced == 0 { try? await Task.sleep(for: .seconds(1)) }
                }
            })
        runner.background.append(self.profiles.inbox.purgeTask())
        if let bus = JetStreamEventConsumer.backgroundTask(
            consumer: "profile", producers: ProfileService.eventProducers, settings: configuration.events.bus, logger: logger,
            apply: { [profiles] in try await profiles.applyEvents($0, from: $1) })
        {
            runner.background.append(bus)
        }

        if let standby = self.standby {
            _ = PostgresPoolMetrics.attach(pool: "profile-standby", database: standby.standby, to: metrics)
            runner.background.append(BackgroundTask("standby-lag") { await standby.run() })
        }
        self.runner = runner
    }

    /// Waits until auth's keys are known and the set of ended sessions is current (tests and readiness), at most
    /// `timeout`; false if that did not happen.
    public func waitUntilReady(timeout: Duration) async -> Bool {
        await self.auth.waitUntilReady(timeout: timeout)
    }

    public func shutdown() async {
        await self.workers.shutdown()
        await self.auth.shutdown()
        await self.database.shutdown()
        await self.standby?.standby.shutdown()
        await self.discoveryClient?.close()
    }
}
