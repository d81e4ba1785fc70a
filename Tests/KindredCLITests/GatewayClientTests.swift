import KindredGRPC
import KindredProto
import Synchronization
import Testing

@testable import KindredCLI

@Suite struct RefreshPolicyTests {
    static let now: Int64 = 1_700_000_000_000

    @Test(arguments: [
        // access expires in, refresh expires in (ms from now), decision
        (Int64(10 * 60_000), Int64(86_400_000), RefreshPolicy.Decision.useAccessToken),
        (61_000, 86_400_000, .useAccessToken),
        (60_000, 86_400_000, .refresh),  // within the minute's margin
        (1_000, 86_400_000, .refresh),
        (-5_000, 86_400_000, .refresh),  // already expired
        (-5_000, 0, .signInAgain),  // refresh token expired at this instant
        (10 * 60_000, -1, .signInAgain),
    ])
    func decision(accessIn: Int64, refreshIn: Int64, expected: RefreshPolicy.Decision) {
        let session = storedSession(accessExpires: Self.now + accessIn, refreshExpires: Self.now + refreshIn)
        #expect(RefreshPolicy().decision(for: session, nowUnixMs: Self.now) == expected)
    }

    @Test func unsetRefreshExpiryIsNotExpired() {
        let session = storedSession(accessExpires: Self.now + 600_000, refreshExpires: 0)
        #expect(RefreshPolicy().decision(for: session, nowUnixMs: Self.now) == .useAccessToken)
    }

    @Test func marginIsConfigurable() {
        let session = storedSession(accessExpires: Self.now + 90_000)
        #expect(RefreshPolicy(margin: .seconds(60)).decision(for: session, nowUnixMs: Self.now) == .useAccessToken)
        #expect(RefreshPolicy(margin: .seconds(120)).decision(for: session, nowUnixMs: Self.now) == .refresh)
    }
}

@Suite struct GatewayClientTests {
    static let now: Int64 = 1_700_000_000_000
    let directory = TemporaryDirectory()
    var store: SessionStore { SessionStore(directory: self.directory.path) }
    let settings = Settings(target: testTarget, community: "demo", timeout: .seconds(5))

    private func client(_ transport: ScriptedTransport) -> GatewayClient {
        GatewayClient(transport: transport, store: self.store, settings: self.settings, now: { Self.now })
    }

    private static func account() -> Kindred.Api.V1.GetAccountResponse {
        .with { $0.account = .with { $0.username = "alice" } }
    }

    private static func refreshed(_ number: Int) -> Kindred.Api.V1.RefreshResponse {
        .with {
            $0.tokens = tokens(
                access: "access-\(number)",
                accessExpires: Self.now + 900_000,
                refresh: "refresh-\(number)"
            )
        }
    }

    @Test func freshTokenIsUsedAsIs() async throws {
        defer { self.directory.remove() }
        try self.store.save(storedSession(accessExpires: Self.now + 600_000))
        let transport = ScriptedTransport { _, _, _ in Self.account() }
        _ = try await self.client(transport).authenticated(GatewayClient.API.getAccount, .init())
        #expect(transport.calls == [.init(path: getAccountPath, authorization: "Bearer access-1")])
    }

    @Test func expiringTokenIsRefreshedAndPersistedBeforeUse() async throws {
        defer { self.directory.remove() }
        try self.store.save(storedSession(accessExpires: Self.now + 30_000))
        let store = self.store
        let transport = ScriptedTransport { path, request, _ in
            if path == refreshPath {
                #expect((request as? Kindred.Api.V1.RefreshRequest)?.refreshToken == "refresh-1")
                return Self.refreshed(2)
            }
            // By the time the new access token is used, the new refresh token is on disk.
            let onDisk = try store.load()
            #expect(onDisk?.refreshToken == "refresh-2")
            return Self.account()
        }
        _ = try await self.client(transport).authenticated(GatewayClient.API.getAccount, .init())
        #expect(
            transport.calls == [
                .init(path: refreshPath, authorization: nil),
                .init(path: getAccountPath, authorization: "Bearer access-2"),
            ]
        )
        let stored = try #require(try self.store.load())
        #expect(stored.accessToken == "access-2")
        #expect(stored.accessTokenExpiresUnixMs == Self.now + 900_000)
        #expect(stored.username == "alice")
    }

    @Test func unauthenticatedIsRetriedOnceAfterARefresh() async throws {
        defer { self.directory.remove() }
        try self.store.save(storedSession(accessExpires: Self.now + 600_000))
        let transport = ScriptedTransport { path, _, authorization in
            if path == refreshPath { return Self.refreshed(2) }
            if authorization == "Bearer access-1" {
                throw try serverError(.unauthenticated, "A valid access token is required", reason: "UNAUTHENTICATED")
            }
            return Self.account()
        }
        let response = try await self.client(transport).authenticated(GatewayClient.API.getAccount, .init())
        #expect(response.account?.username == "alice")
        #expect(transport.calls.map(\.path) == [getAccountPath, refreshPath, getAccountPath])
        #expect(try self.store.load()?.refreshToken == "refresh-2")
    }

    @Test func onlyOneRetry() async throws {
        defer { self.directory.remove() }
        try self.store.save(storedSession(accessExpires: Self.now + 600_000))
        let transport = ScriptedTransport { path, _, _ in
            if path == refreshPath { return Self.refreshed(2) }
            throw try serverError(.unauthenticated, "The session has ended", reason: "UNAUTHENTICATED")
        }
        await #expect(throws: RPCError.self) {
            try await self.client(transport).authenticated(GatewayClient.API.getAccount, .init())
        }
        #expect(transport.calls.map(\.path) == [getAccountPath, refreshPath, getAccountPath])
    }

    @Test func wrongPasswordIsNotRetried() async throws {
        defer { self.directory.remove() }
        try self.store.save(storedSession(accessExpires: Self.now + 600_000))
        let transport = ScriptedTransport { _, _, _ in
            throw try serverError(.unauthenticated, "The password is wrong", reason: "INVALID_CREDENTIALS")
        }
        await #expect(throws: RPCError.self) {
            try await self.client(transport).authenticated(GatewayClient.API.changePassword, .init())
        }
        #expect(transport.calls.count == 1)
        #expect(try self.store.load()?.refreshToken == "refresh-1")
    }

    @Test(arguments: ["TOKEN_REUSED", "UNAUTHENTICATED"])
    func refusedRefreshEndsTheLocalSession(reason: String) async throws {
        defer { self.directory.remove() }
        try self.store.save(storedSession(accessExpires: Self.now - 1))
        let transport = ScriptedTransport { _, _, _ in
            throw try serverError(.unauthenticated, "The refresh token was already used", reason: reason)
        }
        await #expect(throws: CLIError.sessionEnded(reason: reason)) {
            try await self.client(transport).authenticated(GatewayClient.API.getAccount, .init())
        }
        #expect(try self.store.load() == nil)
    }

    @Test func unreachableGatewayKeepsTheSession() async throws {
        defer { self.directory.remove() }
        try self.store.save(storedSession(accessExpires: Self.now - 1))
        let transport = ScriptedTransport { _, _, _ in
            throw RPCError(.unavailable, "Failed to connect to 127.0.0.1:50050")
        }
        await #expect(throws: RPCError.self) {
            try await self.client(transport).authenticated(GatewayClient.API.getAccount, .init())
        }
        #expect(try self.store.load()?.refreshToken == "refresh-1")
    }

    @Test func expiredRefreshTokenNeedsASignIn() async throws {
        defer { self.directory.remove() }
        try self.store.save(storedSession(accessExpires: Self.now - 1, refreshExpires: Self.now - 1))
        let transport = ScriptedTransport { _, _, _ in Self.account() }
        await #expect(throws: CLIError.sessionEnded(reason: nil)) {
            try await self.client(transport).authenticated(GatewayClient.API.getAccount, .init())
        }
        #expect(transport.calls.isEmpty)
        #expect(try self.store.load() == nil)
    }

    @Test func tokensRotatedByAnotherProcessAreUsedWithoutRefreshing() async throws {
        defer { self.directory.remove() }
        let stale = storedSession(accessExpires: Self.now - 1)
        try self.store.save(storedSession(access: "access-9", accessExpires: Self.now + 600_000, refresh: "refresh-9"))
        let transport = ScriptedTransport { _, _, _ in Self.refreshed(10) }
        let session = try await self.client(transport).refresh(stale)
        #expect(session.accessToken == "access-9")
        #expect(transport.calls.isEmpty)
    }

    @Test func notSignedIn() async throws {
        defer { self.directory.remove() }
        let transport = ScriptedTransport { _, _, _ in Self.account() }
        await #expect(throws: CLIError.notSignedIn) {
            try await self.client(transport).authenticated(GatewayClient.API.getAccount, .init())
        }
    }

    @Test func sessionOfAnotherGatewayIsNotSent() async throws {
        defer { self.directory.remove() }
        var session = storedSession(accessExpires: Self.now + 600_000)
        session.gateway = "elsewhere.example:443"
        try self.store.save(session)
        let transport = ScriptedTransport { _, _, _ in Self.account() }
        await #expect(throws: CLIError.self) {
            try await self.client(transport).authenticated(GatewayClient.API.getAccount, .init())
        }
        #expect(transport.calls.isEmpty)
    }

    @Test func signInStoresTheSessionAndEndsThePreviousOne() async throws {
        defer { self.directory.remove() }
        try self.store.save(
            storedSession(access: "old-access", accessExpires: Self.now + 600_000, refresh: "old-refresh")
        )
        let signOutRefreshToken = Mutex<String?>(nil)
        let transport = ScriptedTransport { path, request, _ in
            switch path {
            case GatewayClient.API.signIn.path:
                let request = try #require(request as? Kindred.Api.V1.SignInRequest)
                #expect(request.communityId == "demo")
                #expect(request.login == "alice")
                #expect(request.password == "correct horse")
                return Kindred.Api.V1.SignInResponse.with {
                    $0.tokens = tokens(access: "access-1", accessExpires: Self.now + 900_000, refresh: "refresh-1")
                    $0.account = .with {
                        $0.userId = "0192bbbb-0000-7000-8000-000000000002"
                        $0.username = "alice"
                    }
                }
            case GatewayClient.API.signOut.path:
                signOutRefreshToken.withLock { $0 = (request as? Kindred.Api.V1.SignOutRequest)?.refreshToken }
                return Kindred.Api.V1.SignOutResponse()
            default:
                Issue.record("unexpected \(path)")
                return Kindred.Api.V1.SignOutResponse()
            }
        }
        let (session, _) = try await self.client(transport).signIn(
            login: "alice",
            password: "correct horse",
            client: .init()
        )
        #expect(try self.store.load() == session)
        #expect(session.accessToken == "access-1")
        #expect(session.gateway == "127.0.0.1:50050")
        #expect(signOutRefreshToken.withLock { $0 } == "old-refresh")
        #expect(transport.calls.last?.authorization == "Bearer old-access")
    }
}
