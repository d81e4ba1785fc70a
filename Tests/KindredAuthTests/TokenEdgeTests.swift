import Foundation
import KindredGRPC
import KindredProto
import Testing

@testable import KindredAuth

@Suite("One-time tokens and refresh races")
struct TokenEdgeTests {
    @Test func expiredVerificationTokenAndResendReplacesIt() async throws {
        try await AuthHarness.with { auth in
            let email = AuthHarness.uniqueEmail()
            try await auth.signUp(email: email, username: AuthHarness.uniqueUsername())
            let first = try #require(try await auth.mails(to: email)[0].token)
            try await auth.database.execute("UPDATE email_tokens SET expires_at = now() - interval '1 second'")
            await expectRPCError(.failedPrecondition, reason: "TOKEN_EXPIRED") {
                _ = try await auth.verify(token: first)
            }
            auth.clock.advance(seconds: 61)
            var resend = Kindred.Auth.V1.ResendVerificationRequest()
            resend.communityId = auth.community
            resend.email = email
            _ = try await auth.call(Auth.resendVerification, resend)
            let second = try #require(try await auth.mails(to: email, count: 2)[1].token)
            #expect(second != first)
            _ = try await auth.verify(token: second)
            _ = try await auth.signIn(login: email)
            // Unknown addresses get the same answer.
            resend.email = AuthHarness.uniqueEmail("ghost")
            #expect(try await auth.call(Auth.resendVerification, resend).resendAfterSeconds == 60)
        }
    }

    @Test func fiveWrongCodesExhaustTheCode() async throws {
        try await AuthHarness.with { auth in
            let email = AuthHarness.uniqueEmail()
            try await auth.signUp(email: email, username: AuthHarness.uniqueUsername())
            let code = try #require(try await auth.mails(to: email)[0].code)
            var proof = Kindred.Auth.V1.EmailCode()
            proof.communityId = auth.community
            proof.email = email
            proof.code = code == "123456" ? "654321" : "123456"
            var request = Kindred.Auth.V1.VerifyEmailRequest()
            request.proof = .code(proof)
            for _ in 0..<5 {
                await expectRPCError(.failedPrecondition) { _ = try await auth.call(Auth.verifyEmail, request) }
            }
            proof.code = code
            request.proof = .code(proof)
            await expectRPCError(.resourceExhausted) { _ = try await auth.call(Auth.verifyEmail, request) }
        }
    }

    @Test func concurrentRefreshesOfOneTokenLeaveNoLiveFamily() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            let results = await withTaskGroup(of: Result<Kindred.Auth.V1.TokenBundle, any Error>.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        do { return .success(try await auth.refresh(user.tokens.refreshToken)) } catch {
                            return .failure(error)
                        }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            let winners = results.compactMap { try? $0.get() }
            #expect(winners.count == 1)
            let reused = results.filter {
                if case .failure(let error as RPCError) = $0 { return error.code == .unauthenticated }
                return false
            }
            #expect(reused.count == 3)
            // The reuse revoked the family, so even the winner's new token is dead.
            await expectRPCError(.unauthenticated) { _ = try await auth.refresh(winners[0].refreshToken) }
        }
    }

    @Test func checkUsername() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            var request = Kindred.Auth.V1.CheckUsernameRequest()
            request.communityId = auth.community
            request.username = user.username.uppercased()
            let taken = try await auth.call(Auth.checkUsername, request)
            #expect(!taken.available && taken.unavailableReason == "TAKEN" && taken.normalizedUsername == user.username)
            request.username = "free_name_\(UUID().uuidString.prefix(4).lowercased())"
            #expect(try await auth.call(Auth.checkUsername, request).available)
            request.username = "-bad-"
            #expect(try await auth.call(Auth.checkUsername, request).unavailableReason == "INVALID_FORMAT")
        }
    }

    @Test func errorsCarryNoSecrets() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            _ = try await auth.refresh(user.tokens.refreshToken)
            do {
                _ = try await auth.refresh(user.tokens.refreshToken)
            } catch let error as RPCError {
                #expect(!error.message.contains(user.tokens.refreshToken))
                #expect(!error.message.lowercased().contains("select"))
            }
        }
    }
}
