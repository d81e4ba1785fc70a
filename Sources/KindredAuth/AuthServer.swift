import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredOpenSSL
import KindredPostgres
import KindredProto
import KindredSMTP
import Logging
import NIOCore

/// The whole auth service, built from a configuration: database pool, Argon2 pool, signing key, mail relay
/// and the gRPC server (with health and reflection). `auth-server` is a thin wrapper around it; tests start
/// it in-process.
public final class AuthServer: Sendable {
    public let configuration: AuthConfiguration
    public let database: PostgresClient
    public let hasher: PasswordHasher
    public let service: AuthService
    public let relay: MailRelay
    public let runner: ServerRunner
    private let logger: Logger

    public init(configuration: AuthConfiguration, limiter: RateLimiter = RateLimiter(), logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        var postgres = try PostgresConfiguration(configuration.databaseURL)
        postgres.applicationName = "kindred-auth"
        postgres.settings["search_path"] = "auth"
        var pool = PostgresClient.PoolConfiguration()
        pool.maxConnections = configuration.databasePoolSize
        self.database = PostgresClient(configuration: postgres, pool: pool, logger: logger)
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
        if let jwks = configuration.oidcJWKSFile, !configuration.oidcAudiences.isEmpty {
            let keySet = try JSONWebKeySet(json: try Data(contentsOf: URL(fileURLWithPath: jwks)))
            idTokenVerifier = IDTokenVerifier(
                issuers: configuration.oidcIssuers,
                audiences: configuration.oidcAudiences,
                keySet: keySet
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
            mailRelayNudge: { relay.nudge() },
            logger: logger
        )
        var server = GRPCServerConfiguration()
        server.host = configuration.listenHost
        server.port = configuration.listenPort
        server.accessLogLevel = configuration.accessLog ? .info : nil
        if let certificate = configuration.tlsCertificateFile, let key = configuration.tlsKeyFile {
            server.tls = try TLSContext(
                configuration: .server(certificateChainFile: certificate, privateKeyFile: key)
            )
        }
        var runner = ServerRunner(configuration: server, services: [self.service])
        runner.admin = configuration.adminListen.map { AdminServer.Configuration(host: $0.host, port: $0.port) }
        let database = self.database
        let feed = self.service.revocationFeed
        runner.extraMetrics = [
            { database.statistics.prometheusText(pool: "auth") },
            {
                """
                # HELP auth_revoked_sessions Ended sessions whose access tokens are refused (until they expire).
                # TYPE auth_revoked_sessions gauge
                auth_revoked_sessions \(feed.revocations.count)
                # HELP auth_revocation_subscribers Open WatchRevokedSessions streams.
                # TYPE auth_revocation_subscribers gauge
                auth_revocation_subscribers \(feed.subscriberCount)
                # HELP auth_revocation_synced 1 while the LISTEN connection is up and the snapshot loaded.
                # TYPE auth_revocation_synced gauge
                auth_revocation_synced \(feed.isSynced ? 1 : 0)

                """
            },
        ]
        self.runner = runner
    }

    /// The migrations in `services/auth/migrations`, found relative to `directory` or the working directory.
    public static func migrator(directory: String? = nil) throws -> PostgresMigrator {
        let path =
            directory ?? ProcessInfo.processInfo.environment["KINDRED_AUTH_MIGRATIONS_DIR"]
            ?? "services/auth/migrations"
        return try PostgresMigrator(schema: "auth", directory: path)
    }

    public func migrate(directory: String? = nil) async throws {
        let applied = try await Self.migrator(directory: directory).migrate(on: self.database, logger: self.logger)
        self.logger.info("migrations applied", metadata: ["db.migrations": "\(applied.count)"])
    }

    /// Grants ROLE_ADMIN to the account with `email` (operator command; no RPC involved). Returns its user id.
    /// Throws NOT_FOUND when no account has the address, FAILED_PRECONDITION when several communities do and
    /// `community` was not given.
    public func bootstrapAdmin(email rawEmail: String, community: String?) async throws -> String {
        let email = try Validation.email(rawEmail)
        return try await self.database.withTransaction { transaction in
            let rows = try await transaction.query(
                """
                SELECT id FROM accounts WHERE email = \(email) AND (\(community)::text IS NULL OR community_id = \(community))
                FOR UPDATE
                """
            )
            guard !rows.isEmpty else { throw AuthError(.notFound, "No account has this address") }
            guard rows.count == 1 else {
                throw AuthError(.failedPrecondition, "Several communities have this address: pass --community")
            }
            let id = try rows[0].decode(String.self, at: 0)
            try await transaction.execute(
                """
                UPDATE accounts SET roles = ARRAY(SELECT DISTINCT unnest(roles || ARRAY['user', 'admin']) ORDER BY 1)
                WHERE id = \(id)
                """
            )
            return id
        }
    }

    /// Serves until SIGTERM/SIGINT, with the mail relay and the session revocation feed running alongside.
    public func serve(onListening: @Sendable @escaping (SocketAddress) -> Void = { _ in }) async throws {
        let background = self.startBackground()
        defer { background.cancel() }
        // Draining (health NOT_SERVING) ends the WatchRevokedSessions streams, so the drain does not wait for them.
        let drainWatch = Task { [runner, service] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(200))
                if runner.health.status(of: "") == false {
                    service.revocationFeed.drain()
                    return
                }
            }
        }
        defer { drainWatch.cancel() }
        try await self.runner.run(logger: self.logger, onListening: onListening)
        background.cancel()
        await background.value
        await self.shutdown()
    }

    /// The mail relay and the revocation feed, in one task.
    private func startBackground() -> Task<Void, Never> {
        Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.relay.run() }
                group.addTask { await self.service.revocationFeed.run() }
            }
        }
    }

    /// Starts the gRPC server, the relay and the revocation feed without waiting for signals (tests); returns
    /// once the feed has its snapshot (or after 10 s). Stop by shutting the server down and cancelling `relay`.
    public func start() async throws -> (server: GRPCServer, relay: Task<Void, Never>, address: SocketAddress) {
        let server = self.runner.makeServer(logger: self.logger)
        let address = try await server.start()
        self.runner.health.setStatus(true)
        let background = self.startBackground()
        let deadline = ContinuousClock.now + .seconds(10)
        while !self.service.revocationFeed.isSynced, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        return (server, background, address)
    }

    public func shutdown() async {
        await self.database.shutdown()
        await self.hasher.shutdown()
    }
}
