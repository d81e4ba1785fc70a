import Foundation
import KindredGRPC
import KindredIdentity
import KindredOpenSSL
import KindredProto
import Testing

@testable import KindredAuth

@Suite("Service tokens, bootstrap, roles and account search")
struct AdminTests {
    static let secret = String(repeating: "s3cr3t-", count: 6)

    @Test func serviceTokenAndFootprint() async throws {
        try await AuthHarness.with(configure: { $0.serviceSecrets = ["gateway": Self.secret] }) { auth in
            let user = try await auth.activeUser()
            var request = Kindred.Auth.V1.IssueServiceTokenRequest()
            request.serviceName = "gateway"
            request.clientSecret = Self.secret + "x"
            await expectRPCError(.unauthenticated) { _ = try await auth.call(Auth.issueServiceToken, request) }
            request.serviceName = "chat"
            request.clientSecret = Self.secret
            await expectRPCError(.unauthenticated) { _ = try await auth.call(Auth.issueServiceToken, request) }
            request.serviceName = "gateway"
            let token = try await auth.call(Auth.issueServiceToken, request)
            let key = try await auth.call(Auth.getPublicKeys, .init()).keys[0]
            let claims = try AccessTokenVerifier(keys: [
                key.keyId: try Ed25519PublicKey(rawRepresentation: key.publicKey)
            ])
            .verify(token.accessToken)
            #expect(claims.sub == "service:gateway" && claims.roles == ["service"] && claims.sid == nil)
            #expect(claims.exp - claims.iat <= 900)

            var footprint = Kindred.Common.V1.GetUserFootprintRequest()
            footprint.userId = user.account.userId
            await expectRPCError(.permissionDenied) {
                _ = try await auth.call(Auth.getUserFootprint, footprint, token: user.tokens.accessToken)
            }
            let counts = try await auth.call(Auth.getUserFootprint, footprint, token: token.accessToken).counts
            #expect(counts.first { $0.kind == "accounts" }?.rows == 1)
            #expect(counts.first { $0.kind == "sessions" }?.rows == 1)
            // A service may read any account.
            var get = Kindred.Auth.V1.GetAccountRequest()
            get.userId = user.account.userId
            #expect(try await auth.call(Auth.getAccount, get, token: token.accessToken).account?.email == user.email)
        }
    }

    @Test func bootstrapRolesAndSearch() async throws {
        try await AuthHarness.with(configure: { $0.bootstrapSecret = Self.secret }) { auth in
            let first = try await auth.activeUser()
            let second = try await auth.activeUser()
            var bootstrap = Kindred.Auth.V1.BootstrapAdminRequest()
            bootstrap.communityId = auth.community
            bootstrap.login = first.username
            bootstrap.bootstrapSecret = "wrong" + Self.secret
            await expectRPCError(.permissionDenied) { _ = try await auth.call(Auth.bootstrapAdmin, bootstrap) }
            bootstrap.bootstrapSecret = Self.secret
            let promoted = try await auth.call(Auth.bootstrapAdmin, bootstrap)
            #expect(promoted.account?.roles == [.admin, .user])
            bootstrap.login = second.username
            await expectRPCError(.failedPrecondition) { _ = try await auth.call(Auth.bootstrapAdmin, bootstrap) }

            let adminToken = try await auth.signIn(login: first.email).tokens!.accessToken
            #expect(AccessTokenVerifier.keyID(of: adminToken) != nil)
            var roles = Kindred.Auth.V1.SetAccountRolesRequest()
            roles.userId = first.account.userId
            roles.roles = [.user]
            await expectRPCError(.failedPrecondition) {
                _ = try await auth.call(Auth.setAccountRoles, roles, token: adminToken)
            }
            roles.roles = [.service]
            await expectRPCError(.invalidArgument) {
                _ = try await auth.call(Auth.setAccountRoles, roles, token: adminToken)
            }
            roles.userId = second.account.userId
            roles.roles = [.admin]
            #expect(
                try await auth.call(Auth.setAccountRoles, roles, token: adminToken).account?.roles == [.admin, .user]
            )
            await expectRPCError(.permissionDenied) {
                _ = try await auth.call(Auth.listAccounts, .init(), token: first.tokens.accessToken)  // token from before: roles ["user"]
            }

            var list = Kindred.Auth.V1.ListAccountsRequest()
            list.pageSize = 1
            let page1 = try await auth.call(Auth.listAccounts, list, token: adminToken)
            #expect(page1.accounts.count == 1 && !page1.nextPageToken.isEmpty)
            #expect(page1.accounts[0].userId == second.account.userId)  // newest first
            list.pageToken = page1.nextPageToken
            let page2 = try await auth.call(Auth.listAccounts, list, token: adminToken)
            #expect(page2.accounts.map(\.userId) == [first.account.userId] && page2.nextPageToken.isEmpty)
            list.query = "x"  // the token belongs to other filters
            await expectRPCError(.invalidArgument) {
                _ = try await auth.call(Auth.listAccounts, list, token: adminToken)
            }
            list.pageToken = ""
            list.query = String(first.username.prefix(6)).uppercased() + "%"
            #expect(try await auth.call(Auth.listAccounts, list, token: adminToken).accounts.isEmpty)  // % is literal
            list.query = first.email
            #expect(
                try await auth.call(Auth.listAccounts, list, token: adminToken).accounts.map(\.userId) == [
                    first.account.userId
                ]
            )
        }
    }
}
