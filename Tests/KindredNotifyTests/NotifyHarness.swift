import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredNotify
import KindredPostgres
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import Logging
import Testing

typealias Notify = Kindred.Notify.V1
typealias N = Kindred.Notify.V1.NotifyService.Method

/// Token signing for tests: the notify server trusts this key (as it trusts auth's keys in production).
let testKeys = TestTokens(keyID: "notify-test")

/// The key webhook secrets are sealed with in tests (`KINDRED_NOTIFY_WEBHOOK_KEY`).
let testWebhookKey = "test-webhook-key-0123456789abcdef0123456789abcdef"

/// The notify server as TestServer builds it, with callers checked against `testKeys` instead of auth's keys
/// (the rest is the real server: configuration from settings, database, stores, inbox).
enum TestNotifyDefinition: ServerDefinition {
    static let name = "notify"
    static let summary = "notify (tests)"
    static let defaultPort = 50056
    static let schema: String? = "notify"

    static func makeServer(settings: EnvironmentReader, logger: Logger) async throws -> NotifyServer {
        let server = try NotifyServer(
            configuration: NotifyConfiguration(settings),
            auth: AuthConnection(fixedKeys: testKeys.trustedKeys, logger: logger), logger: logger)
        do {
            try await server.prepare(logger: logger)
        } catch {
            await server.shutdown()
            throw error
        }
        return server
    }
}

/// One notify server on a fresh database and a client.
struct NotifyHarness {
    let server: TestServer<TestNotifyDefinition>
    let client: GRPCClient
    var database: PostgresClient { self.server.server.database }

    static func with<T>(settings: [String: String] = [:], _ body: (NotifyHarness) async throws -> T) async throws -> T {
        var logger = Logger(label: "kindred.notify.test")
        logger.logLevel = .error
        let server = try await TestServer<TestNotifyDefinition>.start(
            settings: ["KINDRED_NOTIFY_WEBHOOK_KEY": testWebhookKey].merging(settings) { $1 }, logger: logger)
        let client = server.makeClient(logger: logger)
        let harness = NotifyHarness(server: server, client: client)
        let result: Result<T, any Error>
        do { result = .success(try await body(harness)) } catch { result = .failure(error) }
        await client.close()
        await server.stop()
        return try result.get()
    }

    static func member() throws -> (id: String, token: String) {
        let id = try UUIDv7.generate()
        return (id, testKeys.userToken(id, community: "dating"))
    }

    func register(_ token: String, platform: Notify.PushPlatform = .fcm, device: String, locale: String = "")
        async throws -> Notify.RegisterDeviceResponse
    {
        var request = Notify.RegisterDeviceRequest()
        request.platform = platform
        request.token = device
        request.appId = "com.example.kindred"
        request.locale = locale
        return try await self.client.call(N.registerDevice, request, token: token)
    }

    func devices(_ token: String) async throws -> [Notify.Device] {
        try await self.client.call(N.listDevices, .init(), token: token).devices
    }

    /// Rows per kind from GetUserFootprint (service token).
    func footprint(_ user: String) async throws -> [String: Int64] {
        let response = try await self.client.call(
            N.getUserFootprint, .with { $0.userId = user }, token: testKeys.serviceToken("gateway"))
        return Dictionary(uniqueKeysWithValues: response.counts.map { ($0.kind, $0.rows) })
    }
}
