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
    public let runner: ServerRunner
    public let blobs: any PhotoBlobStorage
    let profiles: ProfileService
    let workers: PhotoWorkers
    private let authClient: GRPCClient
    private let authenticator: CallerAuthenticator
    private let followsSessionEnds: Bool
    private let logger: Logger

    public init(configuration: ProfileConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        self.database = try configuration.database.makeClient(logger: logger)
        var clientConfiguration = GRPCClientConfiguration(
            host: configuration.authAddress.host, port: configuration.authAddress.port)
        clientConfiguration.defaultTimeout = .seconds(5)
        clientConfiguration.connectTimeout = .seconds(2)
        let authClient = GRPCClient(configuration: clientConfiguration, logger: logger)
        self.authClient = authClient

        let revocations = RevokedSessions(staleAfter: configuration.revocationStaleAfter)
        let authenticator = CallerAuthenticator(refetchInterval: .seconds(5), revocations: revocations) {
            let response = try await authClient.unary(
                Kindred.Auth.V1.AuthService.Method.getPublicKeys, Kindred.Auth.V1.GetPublicKeysRequest(),
                options: CallOptions(timeout: .seconds(3)))
            var keys: [String: Ed25519PublicKey] = [:]
            for key in response.keys where key.curve == "Ed25519" && key.status != .retired {
                keys[key.keyId] = try Ed25519PublicKey(rawRepresentation: key.publicKey)
            }
            return keys
        }
        self.authenticator = authenticator
        self.followsSessionEnds = configuration.serviceSecret != nil
        let callers = Callers(authenticator: authenticator)
        var tokens: ServiceTokenSource?
        var watcher: RevocationWatcher?
        if let secret = configuration.serviceSecret {
            let source = ServiceTokenSource(auth: authClient, serviceName: "profile", secret: secret)
            tokens = source
            watcher = RevocationWatcher(client: authClient, revocations: revocations, logger: logger) {
                try await source.token()
            }
        } else {
            logger.error(
                "KINDRED_PROFILE_SERVICE_SECRET is not set: session ends cannot be followed, calls with a user token answer UNAVAILABLE"
            )
        }

        if let directory = configuration.photoDirectory {
            self.blobs = try FolderPhotoBlobStorage(root: directory)
        } else {
            self.blobs = PostgresPhotoBlobStorage(database: self.database)
        }
        self.workers = PhotoWorkers(threads: configuration.photoWorkers, maxQueued: configuration.photoWorkers * 4)
        // Page tokens are signed with a key of this process's own: they do not outlive a restart (clients start
        // over), and nothing secret needs configuring for them.
        let pageTokenKey = (0..<32).map { _ in UInt8.random(in: 0...255) }
        self.profiles = ProfileService(
            configuration: configuration, database: self.database, callers: callers, blobs: self.blobs,
            photoWorkers: self.workers, pageTokenKey: pageTokenKey, logger: logger)
        let communities = CommunityService(database: self.database, callers: callers, pageTokenKey: pageTokenKey)

        let metrics = ServerMetrics()
        var server = try configuration.endpoint.serverConfiguration()
        // UploadPhoto chunks are up to 1 MiB: a stream window of several chunks keeps a whole chunk from waiting
        // on the window of the one before it (with the runtime's 1 MiB default, 1 MB chunks stalled).
        server.http2.initialStreamWindowSize = 4 << 20
        var runner = ServerRunner(configuration: server, services: [communities, self.profiles])
        runner.admin = configuration.endpoint.adminConfiguration
        runner.metrics = metrics
        _ = PostgresPoolMetrics.attach(pool: "profile", database: self.database, to: metrics)
        runner.background = [.once("key-warm-up") { await authenticator.prefetch() }]
        if let watcher {
            runner.background.append(BackgroundTask("revocation-watcher") { await watcher.run() })
        }
        if let tokens, !configuration.eventConsumers.isEmpty {
            var events = OutboxRelayConfiguration(producer: "profile", consumers: configuration.eventConsumers)
            events.pollInterval = configuration.eventPollInterval
            let relay = OutboxRelay(
                configuration: events, database: self.database, tokens: tokens, metricsFactory: metrics.factory,
                logger: logger)
            runner.background.append(BackgroundTask("events-relay") { await relay.run() })
        }
        let inbox = self.profiles.inbox
        runner.background.append(
            BackgroundTask("inbox-purge") {
                while !Task.isCancelled {
                    _ = try? await inbox.purge()
                    try? await Task.sleep(for: .seconds(3600))
                }
            })
        self.runner = runner
    }

    /// Waits until auth's keys are known and the set of ended sessions is current (tests and readiness), at most
    /// `timeout`; false if that did not happen.
    public func waitUntilReady(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !(self.authenticator.hasKeys && (!self.followsSessionEnds || self.authenticator.revocations?.isFresh == true)) {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    public func shutdown() async {
        await self.workers.shutdown()
        await self.authClient.close()
        await self.database.shutdown()
    }
}
