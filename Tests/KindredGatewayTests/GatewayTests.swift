import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredGateway
import KindredProto
import Testing

@Suite("Gateway against a real auth service")
struct GatewayTests {
    @Test("sign-up and sign-in through the gateway; GetAccount with the token; the request id comes back")
    func accountLifecycle() async throws {
        try await GatewayHarness.with { harness in
            let tokens = try await harness.signedInUser("alice")
            var metadata = GatewayHarness.bearer(tokens)
            metadata.add("x-request-id", "test-request-1")
            let response = try await harness.client.unaryWithMetadata(
                Account.getAccount, Api.GetAccountRequest(), metadata: metadata)
            #expect(response.message.account?.username == "alice")
            #expect(response.message.account?.email == "alice@example.com")
            #expect(response.message.account?.status == .active)
            #expect(response.metadata["x-request-id"] == "test-request-1")

            // Refresh rotates; the spent token is refused (auth's reuse detection, through the gateway).
            var refresh = Api.RefreshRequest()
            refresh.refreshToken = tokens.refreshToken
            let rotated = try await harness.client.unary(Account.refresh, refresh)
            #expect(rotated.tokens?.refreshToken.isEmpty == false)
            let reuse = await expectRPCError(.unauthenticated) { _ = try await harness.client.unary(Account.refresh, refresh) }
            #expect(reuse.flatMap(errorDetail)?.reason == "TOKEN_REUSED")
        }
    }

    @Test("missing, malformed, forged and foreign tokens are UNAUTHENTICATED with a reason and the request id")
    func tokensChecked() async throws {
        try await GatewayHarness.with { harness in
            let tokens = try await harness.signedInUser("bob")
            let missing = await expectRPCError(.unauthenticated) {
                _ = try await harness.client.unary(Account.getAccount, Api.GetAccountRequest())
            }
            let detail = missing.flatMap(errorDetail)
            #expect(detail?.reason == "UNAUTHENTICATED")
            #expect(detail?.requestId.isEmpty == false)

            for header in ["Bearer", "Bearer not-a-jwt", "Basic abc", "Bearer " + Self.forge(tokens.accessToken)] {
                _ = await expectRPCError(.unauthenticated) {
                    _ = try await harness.client.unary(
                        Account.getAccount, Api.GetAccountRequest(), metadata: ["authorization": .string(header)])
                }
            }
        }
    }

    @Test("auth's validation errors pass through with their field violations")
    func downstreamErrorsPassThrough() async throws {
        try await GatewayHarness.with { harness in
            var signUp = Api.SignUpRequest()
            signUp.communityId = harness.community
            signUp.email = "not-an-email"
            signUp.username = "carol"
            signUp.password = "correct horse battery"
            let error = await expectRPCError(.invalidArgument) { _ = try await harness.client.unary(Account.signUp, signUp) }
            let detail = error.flatMap(errorDetail)
            #expect(detail?.fieldViolations.contains { $0.field == "email" } == true)
            #expect(detail?.requestId.isEmpty == false)
            #expect(error?.message.contains("SELECT") == false)
        }
    }

    @Test("per-client and anonymous rate limits answer RESOURCE_EXHAUSTED with retry_after_ms")
    func rateLimits() async throws {
        try await GatewayHarness.with(configure: { $0.anonymousBurst = 3; $0.anonymousRate = 0.1 }) { harness in
            var check = Api.CheckUsernameRequest()
            check.communityId = harness.community
            check.username = "dave"
            for _ in 0..<3 { _ = try await harness.client.unary(Account.checkUsername, check) }
            let error = await expectRPCError(.resourceExhausted) {
                _ = try await harness.client.unary(Account.checkUsername, check)
            }
            let detail = error.flatMap(errorDetail)
            #expect(detail?.reason == "RATE_LIMITED")
            #expect((detail?.retryAfterMs ?? 0) > 1000)
        }
        try await GatewayHarness.with(configure: { $0.accountBurst = 2; $0.accountRate = 0.1 }) { harness in
            let tokens = try await harness.signedInUser("erin")
            for _ in 0..<2 {
                _ = try await harness.client.unary(
                    Account.getAccount, Api.GetAccountRequest(), metadata: GatewayHarness.bearer(tokens))
            }
            _ = await expectRPCError(.resourceExhausted) {
                _ = try await harness.client.unary(
                    Account.getAccount, Api.GetAccountRequest(), metadata: GatewayHarness.bearer(tokens))
            }
        }
    }

    @Test("GetHome: the account, and every part whose service is not deployed listed as unavailable")
    func home() async throws {
        try await GatewayHarness.with { harness in
            let tokens = try await harness.signedInUser("frank")
            let home = try await harness.client.unary(
                Kindred.Api.V1.HomeService.Method.getHome, Api.GetHomeRequest(), metadata: GatewayHarness.bearer(tokens))
            #expect(home.account?.username == "frank")
            #expect(
                home.unavailableParts
                    == ["profile", "community", "deck", "top_picks", "matches", "chat", "likes", "activities"])

            var bad = Api.GetHomeRequest()
            bad.deckPageSize = 500
            let error = await expectRPCError(.invalidArgument) {
                _ = try await harness.client.unary(
                    Kindred.Api.V1.HomeService.Method.getHome, bad, metadata: GatewayHarness.bearer(tokens))
            }
            #expect(error.flatMap(errorDetail)?.fieldViolations.first?.field == "deck_page_size")
        }
    }

    @Test("admin calls need the admin role; services not deployed answer UNIMPLEMENTED")
    func admin() async throws {
        try await GatewayHarness.with { harness in
            let user = try await harness.signedInUser("grace")
            let admin = try await harness.signedInUser("heidi", admin: true)
            typealias Admin = Kindred.Api.V1.AdminService.Method
            _ = await expectRPCError(.permissionDenied) {
                _ = try await harness.client.unary(
                    Admin.listAccounts, Api.ListAccountsRequest(), metadata: GatewayHarness.bearer(user))
            }
            var list = Api.ListAccountsRequest()
            list.communityId = harness.community
            let accounts = try await harness.client.unary(Admin.listAccounts, list, metadata: GatewayHarness.bearer(admin))
            #expect(Set(accounts.accounts.map(\.username)).isSuperset(of: ["grace", "heidi"]))

            var footprint = Api.GetUserFootprintRequest()
            footprint.userId = try #require(accounts.accounts.first { $0.username == "grace" }).userId
            let counts = try await harness.client.unary(
                Admin.getUserFootprint, footprint, metadata: GatewayHarness.bearer(admin))
            #expect(counts.services.map(\.service) == ["auth"])
            #expect(counts.totalRows > 0)
            #expect(counts.unavailableParts == ["profile", "discovery", "match", "chat", "notify"])

            let error = await expectRPCError(.unimplemented) {
                _ = try await harness.client.unary(
                    Admin.listReports, Api.ListReportsRequest(), metadata: GatewayHarness.bearer(admin))
            }
            #expect(error.flatMap(errorDetail)?.reason == "NOT_DEPLOYED")
        }
    }

    @Test("auth down: calls fail UNAVAILABLE with a fixed message, promptly")
    func authDown() async throws {
        try await GatewayHarness.with { harness in
            let tokens = try await harness.signedInUser("ivan")
            await harness.stopAuth()
            let started = ContinuousClock.now
            let error = await expectRPCError(.unavailable) {
                _ = try await harness.client.unary(
                    Account.getAccount, Api.GetAccountRequest(), metadata: GatewayHarness.bearer(tokens),
                    options: CallOptions(timeout: .seconds(120)))
            }
            #expect(ContinuousClock.now - started < .seconds(60))  // far less than the 120 s deadline
            #expect(error?.message.contains("127.0.0.1") == false)
            #expect(error.flatMap(errorDetail)?.reason == "UNAVAILABLE")
        }
    }

    /// The same header and claims with the signature of other bytes.
    static func forge(_ token: String) -> String {
        var parts = token.split(separator: ".").map(String.init)
        guard parts.count == 3 else { return token }
        parts[2] = String(parts[2].reversed())
        return parts.joined(separator: ".")
    }
}
