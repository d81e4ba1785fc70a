import CoreMetrics
import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredOpenSSL
import KindredPostgres
import KindredProto
import KindredSMTP
import KindredServiceKit
import Logging
import NIOCore

/// The whole auth service, built from a configuration: database pool, Argon2 pool, signing key, mail relay
/// and the gRPC server (with health and reflection). `auth-server` is a thin wrapper around it; tests start
/// it in-process.
public final class AuthServer: ServiceServer {
    public let configuration: AuthConfiguration
    public let database: PostgresClient
    public let hasher: PasswordHasher
    public let service: AuthService
    public let relay: MailRelay
    /// Delivers account events to the configured consumers; nil when none is configured.
    public let eventRelay: OutboxRelay?
    public let runner: ServerRunner
    private let logger: Logger

    public init(configuration: AuthConfiguration, limiter: AuthLimiter = AuthLimiter(), logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        self.database = try configuration.database.makeClient(logger: logger)
        self.hasher = try PasswordHasher(parameters: configuration.argon2, threads: configuration.hashThreads)
        let signingKey = try SigningKey.loadOrCreate(path: configuration.effectiveSigningKeyFile)
        let security: SMTPConfiguration.Security =
            switch configuration.smtpSecurity {
            case "none": .none
            case "tls": .implicitTLS
            default: .startTLS(required: true)
            }
        var credentials: SMTPConfiguration.Credentials?
        if let username = configuration.smtpUsername {
            credentials = .init(username: username, password: configuration.smtpPassword ?? "")
        }
        let smtp = try SMTPClient(
            configuration: SMTPConfiguration(
                host: configuration.smtpHost,
                port: configuration.smtpPort,
                security: security,
                credentials: credentials,
                connectTimeout: .seconds(5),
                commandTimeout: .seconds(10)
            ),
            logger: logger
        )
        let relay = MailRelay(database: self.database, smtp: smtp, configuration: configuration, logger: logger)
        self.relay = relay
        var idTokenVerifier: IDTokenVerifier?
        var oidcKeys: OIDCKeySource?
        if !configuration.oidcAudiences.isEmpty {
            let fileKeys = try configuration.oidcJWKSFile.map { path in
                try JSONWebKeySet(json: try Data(contentsOf: URL(fileURLWithPath: path)))
            }
            let urls = configuration.effectiveOIDCJWKSURLs
            if !urls.isEmpty {
                oidcKeys = try OIDCKeySource(
                    configuration: .init(urls: urls, trustRootsFile: configuration.oidcJWKSCAFile),
                    fileKeys: fileKeys,
                    logger: logger
                )
            }
            idTokenVerifier = IDTokenVerifier(
                issuers: configuration.oidcIssuers,
                audiences: configuration.oidcAudiences,
                keySet: fileKeys ?? .empty
            )
        }
        self.service = AuthService(
            configuration: configuration,
            database: self.database,
            hasher: self.hasher,
            signingKey: signingKey,
            commonPasswords: try CommonPasswords.bundled(),
            limiter: limiter,
            idTokenVerifier: idTokenVerifier,
            oidcKeys: oidcKeys,
            mailRelayNudge: { relay.nudge() },
            logger: logger
        )
        let metrics = ServerMetrics()
        let service = self.service
        self.eventRelay = OutboxRelay(
            producer: "auth", settings: configuration.events, database: self.database,
            tokens: ServiceTokenSource { try service.signServiceToken(for: "auth") }, metricsFactory: metrics.factory,
            logger: logger)
        var runner = ServerRunner(configuration: try configuration.endpoint.serverConfiguration(), services: [self.service])
        runner.admin = configuration.endpoint.adminConfiguration
        runner.metrics = metrics
        let feed = self.service.revocationFeed
        PostgresPoolMetrics.attach(pool: "auth", database: self.database, to: metrics)
        // auth_revoked_sessions: ended sessions whose access tokens are refused (until they expire);
        // auth_revocation_subscribers: open WatchRevokedSessions streams;
        // auth_revocation_synced: 1 while the LISTEN connection is up and the snapshot loaded.
        let revoked = Gauge(label: "auth_revoked_sessions", factory: metrics.factory)
        let subscribers = Gauge(label: "auth_revocation_subscribers", factory: metrics.factory)
        let synced = Gauge(label: "auth_revocation_synced", factory: metrics.factory)
        metrics.addSampler {
            revoked.record(feed.revocations.count)
            subscribers.record(feed.subscriberCount)
            synced.record(feed.isSynced ? 1 : 0)
        }
        runner.background = [
            BackgroundTask("mail-relay") { await relay.run() },
            BackgroundTask("revocation-feed") { await feed.run() },
        ]
        if let events = self.eventRelay {
            runner.background.append(BackgroundTask("events-relay") { await events.run() })
        }
        runner.background.append(self.service.inbox.purgeTask())
        let authService = self.service
        if let bus = JetStreamEventConsumer.backgroundTask(
            consumer: "auth", producers: AuthService.eventProducers, settings: configuration.events.bus, logger: logger,
            apply: { [authService] in try await authService.applyEvents($0, from: $1) })
        {
            runner.background.append(bus)
        }

        // Draining ends the WatchRevokedSessions streams, so the drain does not wait for them.
        runner.beforeDrain = [{ feed.drain() }]
        self.runner = runner
    }

    /// Grants ROLE_ADMIN to the account with `email` (operator command; no RPC involved). Returns its user id.
    /// Throws NOT_FOUND when no account has the address, FAILED_PRECONDITION when several communities do and
    /// `community` was not given. Needs only the database.
    public static func bootstrapAdmin(email rawEmail: String, community: String?, database: PostgresClient) async throws
        -> String
    {
        let email = try Validation.email(rawEmail)
        return try await database.withTransaction { transaction in
            let accounts = AccountStore()
            let ids = try await accounts.lockIDs(email: email, community: community, in: transaction)
            guard let id = ids.first else { throw AuthError(.notFound, "No account has this address") }
            guard ids.count == 1 else {
                throw AuthError(.failedPrecondition, "Several communities have this address: pass --community")
            }
            try await accounts.grantAdmin(id: id, in: transaction)
            return id
        }
    }

    /// Starts the gRPC server, the admin port, the relays and the revocation feed without waiting for signals
    /// (tests); returns once the feed has its snapshot (or after 10 s). Stop it with `stop()` on the result,
    /// then `shutdown()`.
    public func start() async throws -> RunningServer {
        let running = try await self.runner.start(logger: self.logger)
        let deadline = ContinuousClock.now + .seconds(10)
        while !self.service.revocationFeed.isSynced, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        return running
    }

    /// Closes the database pool and the Argon2 threads.
    public func shutdown() async {
        await self.database.shutdown()
        await self.hasher.shutdown()
    }
}
