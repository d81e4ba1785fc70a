import Foundation
import KindredArgon2
import KindredAuth
import KindredGRPC
import KindredGRPCServices
import KindredPostgres
import KindredProto
import KindredProtobuf
import Logging
import NIOCore
import Testing

typealias Auth = Kindred.Auth.V1.AuthService.Method

/// Monotonic time plus an offset that tests can advance.
final class TestClock: @unchecked Sendable {
    private let lock = NSLock()
    private var offset: Double = 0
    /// Monotonic time plus the offset: the limiter's clock.
    var deadline: NIODeadline {
        self.lock.withLock { NIODeadline.now() + .nanoseconds(Int64(self.offset * 1e9)) }
    }
    func advance(seconds: Double) { self.lock.withLock { self.offset += seconds } }
}

/// One auth server in-process on 127.0.0.1:0 with its own database, and a client to call it.
struct AuthHarness {
    let server: AuthServer
    let client: GRPCClient
    let mailDirectory: String
    let database: PostgresClient
    let community = "dogs"
    /// The rate limiter's clock; tests move it forward instead of waiting.
    let clock: TestClock

    /// Cheap Argon2 for speed; `realArgon2` uses OWASP parameters.
    static func with<T>(
        realArgon2: Bool = false,
        configure: (inout AuthConfiguration) -> Void = { _ in },
        _ body: (AuthHarness) async throws -> T
    ) async throws -> T {
        let environment = TestEnvironment.shared
        let started = try await environment.start()
        var configuration = AuthConfiguration()
        configuration.database.url = try await environment.makeDatabase()
        configuration.database.poolSize = 4
        configuration.endpoint.listen = HostPort(host: "127.0.0.1", port: 0)
        configuration.endpoint.adminListen = nil
        configuration.dataDirectory = NSTemporaryDirectory() + "kindred-auth-key-\(UUID().uuidString)"
        configuration.smtpHost = "127.0.0.1"
        configuration.smtpPort = started.smtpPort
        configuration.smtpSecurity = "none"
        configuration.mailPollInterval = .milliseconds(100)
        configuration.hashThreads = 2
        if !realArgon2 {
            configuration.argon2 = Argon2id.Parameters(memoryKiB: 64, iterations: 1, parallelism: 1)
        }
        configure(&configuration)
        defer { try? FileManager.default.removeItem(atPath: configuration.dataDirectory) }
        let logger = Logger(label: "kindred.auth.test")
        let clock = TestClock()
        let server = try AuthServer(
            configuration: configuration,
            limiter: AuthLimiter(clock: { clock.deadline }),
            logger: logger
        )
        let running = try await server.start()
        let client = GRPCClient(
            configuration: GRPCClientConfiguration(host: "127.0.0.1", port: running.port),
            logger: logger
        )
        let harness = AuthHarness(
            server: server,
            client: client,
            mailDirectory: started.mailDirectory,
            database: server.database,
            clock: clock
        )
        let result: Result<T, any Error>
        do { result = .success(try await body(harness)) } catch { result = .failure(error) }
        await client.close()
        await running.stop()
        await server.shutdown()
        return try result.get()
    }

    // MARK: Calls

    func call<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ request: Request,
        token: String? = nil,
        ip: String? = nil
    ) async throws -> Response {
        var metadata = Metadata()
        if let token { metadata.add("authorization", "Bearer \(token)") }
        if let ip { metadata.add("x-kindred-client-ip", ip) }
        return try await self.client.unary(method, request, metadata: metadata)
    }

    static func uniqueEmail(_ prefix: String = "user") -> String {
        "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())@example.com"
    }

    static func uniqueUsername() -> String {
        "u_" + UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: "")
    }

    @discardableResult
    func signUp(
        email: String,
        username: String,
        password: String = "correct horse battery",
        locale: String = "",
        ip: String? = nil
    ) async throws -> Kindred.Auth.V1.SignUpResponse {
        var request = Kindred.Auth.V1.SignUpRequest()
        request.communityId = self.community
        request.email = email
        request.username = username
        request.password = password
        request.locale = locale
        return try await self.call(Auth.signUp, request, ip: ip)
    }

    func verify(token: String) async throws -> Kindred.Auth.V1.VerifyEmailResponse {
        var request = Kindred.Auth.V1.VerifyEmailRequest()
        request.proof = .token(token)
        return try await self.call(Auth.verifyEmail, request)
    }

    func signIn(login: String, password: String = "correct horse battery", ip: String? = nil) async throws
        -> Kindred.Auth.V1.SignInResponse
    {
        var request = Kindred.Auth.V1.SignInRequest()
        request.communityId = self.community
        request.login = login
        request.password = password
        var client = Kindred.Auth.V1.ClientInfo()
        client.deviceName = "Test device"
        request.client = client
        return try await self.call(Auth.signIn, request, ip: ip)
    }

    func refresh(_ token: String) async throws -> Kindred.Auth.V1.TokenBundle {
        var request = Kindred.Auth.V1.RefreshRequest()
        request.refreshToken = token
        return try await self.call(Auth.refresh, request).tokens!
    }

    /// Signs up, verifies through the mailed link and signs in.
    func activeUser(email: String = AuthHarness.uniqueEmail(), password: String = "correct horse battery") async throws
        -> (email: String, username: String, tokens: Kindred.Auth.V1.TokenBundle, account: Kindred.Auth.V1.Account)
    {
        let username = Self.uniqueUsername()
        try await self.signUp(email: email, username: username, password: password)
        let mail = try await self.mails(to: email)[0]
        _ = try await self.verify(token: try #require(mail.token))
        let signedIn = try await self.signIn(login: email, password: password)
        // Past the per-address mail limit (1 per minute) of the sign-up, so tests can send more mail at once.
        self.clock.advance(seconds: 61)
        return (email, username, signedIn.tokens!, signedIn.account!)
    }

    /// An active user with the admin role, and an access token that carries it.
    func adminUser() async throws -> (email: String, accessToken: String) {
        let admin = try await self.activeUser()
        try await self.database.execute(
            "UPDATE accounts SET roles = ARRAY['user', 'admin'] WHERE id = \(admin.account.userId)"
        )
        return (admin.email, try await self.signIn(login: admin.email).tokens!.accessToken)
    }

    func mails(to address: String, count: Int = 1) async throws -> [CapturedMail] {
        try await Mailbox.wait(for: address, count: count, in: self.mailDirectory)
    }
}

/// Runs `body`, expecting an RPCError with `code` and (when given) the ErrorDetail `reason`.
@discardableResult
func expectRPCError(
    _ code: StatusCode,
    reason: String? = nil,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Void
) async -> Kindred.Common.V1.ErrorDetail? {
    do {
        try await body()
        Issue.record("expected \(code), the call succeeded", sourceLocation: sourceLocation)
        return nil
    } catch let error as RPCError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        let detail = error.errorDetail
        if let reason { #expect(detail?.reason == reason, "\(error)", sourceLocation: sourceLocation) }
        return detail
    } catch {
        Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
