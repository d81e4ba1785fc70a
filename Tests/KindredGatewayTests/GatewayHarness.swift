import Foundation
import KindredArgon2
import KindredAuth
import KindredGRPC
import KindredGRPCServices
import KindredGateway
import KindredPostgres
import KindredPostgresTesting
import KindredProto
import Logging
import Testing

typealias Api = Kindred.Api.V1
typealias Account = Kindred.Api.V1.AccountService.Method

/// A real auth server (own database on the shared test PostgreSQL) and a gateway in front of it, both
/// in-process on 127.0.0.1:0, and a client of the gateway's public API.
struct GatewayHarness {
    let auth: AuthServer
    let gateway: GatewayServer
    let client: GRPCClient
    let authAddress: Int
    let community = "demo"
    let stopAuth: @Sendable () async -> Void

    static let serviceSecret = "gateway-test-secret-0123456789abcdef"

    static func with<T>(
        configure: (inout GatewayConfiguration) -> Void = { _ in },
        configureAuth: (inout AuthConfiguration) -> Void = { _ in },
        _ body: (GatewayHarness) async throws -> T
    ) async throws -> T {
        let postgres = try await TestPostgres.shared()
        var authConfiguration = AuthConfiguration()
        authConfiguration.database.url = try await postgres.createMigratedDatabase(
            schema: "auth", migrations: Self.repositoryRoot + "/services/auth/migrations")
        authConfiguration.database.poolSize = 4
        authConfiguration.endpoint.listen = HostPort(host: "127.0.0.1", port: 0)
        authConfiguration.endpoint.adminListen = nil
        authConfiguration.dataDirectory = NSTemporaryDirectory() + "kindred-gateway-test-\(UUID().uuidString)"
        authConfiguration.smtpPort = 9  // nothing listens: mail stays queued, which these tests don't need
        authConfiguration.smtpSecurity = "none"
        authConfiguration.mailPollInterval = .seconds(60)
        authConfiguration.hashThreads = 2
        authConfiguration.argon2 = Argon2id.Parameters(memoryKiB: 64, iterations: 1, parallelism: 1)
        authConfiguration.serviceSecrets["gateway"] = Self.serviceSecret
        configureAuth(&authConfiguration)
        defer { try? FileManager.default.removeItem(atPath: authConfiguration.dataDirectory) }
        var logger = Logger(label: "kindred.gateway.test")
        logger.logLevel = .error
        let auth = try AuthServer(configuration: authConfiguration, logger: logger)
        let authServer = try await auth.start()

        var configuration = GatewayConfiguration()
        configuration.endpoint.listen = HostPort(host: "127.0.0.1", port: 0)
        configuration.endpoint.adminListen = nil
        configuration.authAddress = ServiceAddress(host: "127.0.0.1", port: authServer.port)
        configuration.partTimeout = .milliseconds(300)
        configuration.serviceSecret = Self.serviceSecret
        configure(&configuration)
        let gateway = try GatewayServer(configuration: configuration, logger: logger)
        let gatewayServer = try await gateway.start()
        let client = GRPCClient(
            configuration: GRPCClientConfiguration(host: "127.0.0.1", port: gatewayServer.port),
            logger: logger
        )
        let harness = GatewayHarness(
            auth: auth,
            gateway: gateway,
            client: client,
            authAddress: authServer.port,
            stopAuth: { await authServer.stop() }
        )
        let result: Result<T, any Error>
        do { result = .success(try await body(harness)) } catch { result = .failure(error) }
        await client.close()
        await gatewayServer.stop()
        await gateway.shutdown()
        await authServer.stop()
        await auth.shutdown()
        return try result.get()
    }

    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    // MARK: Helpers

    /// Signs up through the gateway, marks the address verified in auth's database (the mail round trip is
    /// covered by the auth and cluster tests), and signs in. Returns the tokens.
    func signedInUser(_ name: String = "user\(UInt32.random(in: 0...UInt32.max))", admin: Bool = false) async throws
        -> Api.AuthTokens
    {
        var signUp = Api.SignUpRequest()
        signUp.communityId = self.community
        signUp.email = "\(name)@example.com"
        signUp.username = name
        signUp.password = "correct horse battery"
        _ = try await self.client.unary(Account.signUp, signUp)
        let roles = admin ? "ARRAY['admin','user']" : "ARRAY['user']"
        _ = try await self.auth.database.execute(
            """
            UPDATE auth.accounts SET status = 'active', email_verified = true, roles = \(unescaped: roles)
            WHERE email = \(signUp.email)
            """
        )
        var signIn = Api.SignInRequest()
        signIn.communityId = self.community
        signIn.login = name
        signIn.password = signUp.password
        let response = try await self.client.unary(Account.signIn, signIn)
        return try #require(response.tokens)
    }

    /// An active account written straight into auth's database (no sign-up mail, so the address's mail quota
    /// is untouched), signed in through the gateway.
    func insertedUser(_ name: String, password: String = "correct horse battery") async throws -> Api.AuthTokens {
        let hash = try await self.auth.hasher.hash(password)
        _ = try await self.auth.database.execute(
            """
            INSERT INTO auth.accounts (id, community_id, email, email_verified, username, password_hash, status)
            VALUES (gen_random_uuid(), \(self.community), \("\(name)@example.com"), true, \(name), \(hash), 'active')
            """
        )
        var signIn = Api.SignInRequest()
        signIn.communityId = self.community
        signIn.login = name
        signIn.password = password
        return try #require(try await self.client.unary(Account.signIn, signIn).tokens)
    }

    static func bearer(_ tokens: Api.AuthTokens) -> Metadata {
        ["authorization": .string("Bearer " + tokens.accessToken)]
    }
}

/// The ErrorDetail of a failed call.
func errorDetail(_ error: RPCError) -> Kindred.Common.V1.ErrorDetail? { error.errorDetail }

/// Runs `body` and returns the RPCError it throws (fails the test when it succeeds).
func expectRPCError(
    _ code: StatusCode,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Void
) async -> RPCError? {
    do {
        try await body()
        Issue.record("expected \(code), the call succeeded", sourceLocation: sourceLocation)
        return nil
    } catch let error as RPCError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
