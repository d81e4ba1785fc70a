import Foundation
import KindredArgon2
import KindredGRPC
import KindredIdentity
import KindredOpenSSL
import KindredProto
import Testing

@testable import KindredAuth

@Suite("SignIn, tokens and sessions")
struct SessionTests {
    @Test func accessTokenVerifiesWithThePublishedKey() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            let keys = try await auth.call(Auth.getPublicKeys, .init())
            #expect(keys.keys.count == 1)
            let key = keys.keys[0]
            #expect(key.algorithm == "EdDSA" && key.curve == "Ed25519" && key.status == .signing)
            let verifier = AccessTokenVerifier(keys: [key.keyId: try Ed25519PublicKey(rawRepresentation: key.publicKey)]
            )
            let claims = try verifier.verify(user.tokens.accessToken)
            #expect(claims.sub == user.account.userId)
            #expect(claims.sid == user.tokens.sessionId)
            #expect(claims.cid == auth.community)
            #expect(claims.roles == ["user"])
            #expect(claims.exp - claims.iat <= 900)
            #expect(user.tokens.tokenType == "Bearer")
            #expect(Base64URL.decode(user.tokens.refreshToken)!.count >= 16)
            // The refresh token is stored as a hash only.
            let stored = try await auth.database.query(
                "SELECT count(*) FROM refresh_tokens WHERE token_hash = \(SHA256.hash(Array(user.tokens.refreshToken.utf8)))"
            )
            #expect(try stored.scalar(Int64.self) == 1)
        }
    }

    @Test func unknownLoginAndWrongPasswordAreIndistinguishable() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            var messages: [String] = []
            for login in [user.email, "nobody-\(UUID().uuidString.prefix(6))@example.com"] {
                do {
                    _ = try await auth.signIn(login: login, password: "wrong password!")
                    Issue.record("sign-in succeeded")
                } catch let error as RPCError {
                    #expect(error.code == .unauthenticated)
                    messages.append(error.message)
                }
            }
            #expect(messages.count == 2 && messages[0] == messages[1])
        }
    }

    @Test func refreshRotatesAndReuseRevokesTheFamily() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            let second = try await auth.refresh(user.tokens.refreshToken)
            #expect(second.refreshToken != user.tokens.refreshToken)
            #expect(second.sessionId == user.tokens.sessionId)
            let third = try await auth.refresh(second.refreshToken)
            // The first token again: reuse. The whole session ends, including the newest token.
            await expectRPCError(.unauthenticated, reason: "TOKEN_REUSED") {
                _ = try await auth.refresh(user.tokens.refreshToken)
            }
            await expectRPCError(.unauthenticated, reason: "UNAUTHENTICATED") {
                _ = try await auth.refresh(third.refreshToken)
            }
            // Access tokens of the revoked session no longer work at auth either.
            await expectRPCError(.unauthenticated) {
                _ = try await auth.call(Auth.listSessions, .init(), token: third.accessToken)
            }
        }
    }

    @Test func expiredRefreshTokenAndSessionLifetime() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            try await auth.database.execute("UPDATE refresh_tokens SET expires_at = now() - interval '1 second'")
            await expectRPCError(.unauthenticated) { _ = try await auth.refresh(user.tokens.refreshToken) }
            // Absolute session lifetime: a fresh token of a session past its end does not refresh.
            let again = try await auth.signIn(login: user.email).tokens!
            try await auth.database.execute(
                "UPDATE sessions SET expires_at = now() - interval '1 second' WHERE id = \(again.sessionId)"
            )
            await expectRPCError(.unauthenticated) { _ = try await auth.refresh(again.refreshToken) }
            // The refresh token never outlives the session: 30 days by default.
            let fresh = try await auth.signIn(login: user.email).tokens!
            let lifetime = fresh.refreshTokenExpiresUnixMs - Int64(Date().timeIntervalSince1970 * 1000)
            #expect(lifetime <= 30 * 86_400_000 && lifetime > 29 * 86_400_000)
        }
    }

    @Test func signOutAndSignOutEverywhere() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            _ = try await auth.call(Auth.signOut, .init(), token: user.tokens.accessToken)
            await expectRPCError(.unauthenticated) { _ = try await auth.refresh(user.tokens.refreshToken) }
            // With only a refresh token.
            let b = try await auth.signIn(login: user.email).tokens!
            var byRefresh = Kindred.Auth.V1.SignOutRequest()
            byRefresh.refreshToken = b.refreshToken
            _ = try await auth.call(Auth.signOut, byRefresh)
            await expectRPCError(.unauthenticated) { _ = try await auth.refresh(b.refreshToken) }
            await expectRPCError(.unauthenticated) { _ = try await auth.call(Auth.signOut, .init()) }

            let c = try await auth.signIn(login: user.email).tokens!
            let d = try await auth.signIn(login: user.email).tokens!
            let e = try await auth.signIn(login: user.email).tokens!
            var keep = Kindred.Auth.V1.SignOutEverywhereRequest()
            keep.keepCurrent = true
            #expect(try await auth.call(Auth.signOutEverywhere, keep, token: c.accessToken).endedSessions == 2)
            _ = try await auth.refresh(c.refreshToken)
            await expectRPCError(.unauthenticated) { _ = try await auth.refresh(d.refreshToken) }
            await expectRPCError(.unauthenticated) { _ = try await auth.refresh(e.refreshToken) }
        }
    }

    @Test func listAndRevokeSessions() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            let other = try await auth.signIn(login: user.email).tokens!
            let list = try await auth.call(Auth.listSessions, .init(), token: user.tokens.accessToken)
            #expect(list.sessions.count == 2)
            #expect(list.sessions.filter(\.current).map(\.sessionId) == [user.tokens.sessionId])
            #expect(list.sessions.allSatisfy { $0.deviceName == "Test device" && $0.signInMethod == .password })
            var page = Kindred.Auth.V1.ListSessionsRequest()
            page.pageSize = 1
            let first = try await auth.call(Auth.listSessions, page, token: user.tokens.accessToken)
            #expect(first.sessions.count == 1 && !first.nextPageToken.isEmpty)
            page.pageToken = first.nextPageToken
            let second = try await auth.call(Auth.listSessions, page, token: user.tokens.accessToken)
            #expect(second.sessions.count == 1 && second.nextPageToken.isEmpty)
            #expect(second.sessions[0].sessionId != first.sessions[0].sessionId)
            page.pageToken = "forged"
            await expectRPCError(.invalidArgument, reason: "PAGE_TOKEN_INVALID") {
                _ = try await auth.call(Auth.listSessions, page, token: user.tokens.accessToken)
            }

            var revoke = Kindred.Auth.V1.RevokeSessionRequest()
            revoke.sessionId = other.sessionId
            _ = try await auth.call(Auth.revokeSession, revoke, token: user.tokens.accessToken)
            await expectRPCError(.unauthenticated) { _ = try await auth.refresh(other.refreshToken) }
            revoke.sessionId = UUID().uuidString.lowercased()
            await expectRPCError(.notFound) {
                _ = try await auth.call(Auth.revokeSession, revoke, token: user.tokens.accessToken)
            }
            await expectRPCError(.unauthenticated) { _ = try await auth.call(Auth.listSessions, .init()) }
        }
    }

    @Test func signInBackoffPerAccount() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            for _ in 0..<5 {
                await expectRPCError(.unauthenticated, reason: "INVALID_CREDENTIALS") {
                    _ = try await auth.signIn(login: user.email, password: "wrong password!")
                }
            }
            // Locked now, even for the right password, with advice when to retry.
            let detail = await expectRPCError(.resourceExhausted, reason: "RATE_LIMITED") {
                _ = try await auth.signIn(login: user.email)
            }
            #expect((detail?.retryAfterMs ?? 0) > 0)
            auth.clock.advance(seconds: 2)
            _ = try await auth.signIn(login: user.email)
        }
    }

    @Test func aStrangerCannotLockTheOwnerOut() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            // One wrong password every 15 minutes for two hours, then two more, from the attacker's address.
            for round in 0..<10 {
                await expectRPCError(.unauthenticated, reason: "INVALID_CREDENTIALS") {
                    _ = try await auth.signIn(login: user.email, password: "wrong password!", ip: "198.51.100.9")
                }
                if round < 8 { auth.clock.advance(seconds: 900) }
            }
            // The attacker's address is held, even with the right password ...
            await expectRPCError(.resourceExhausted, reason: "RATE_LIMITED") {
                _ = try await auth.signIn(login: user.email, ip: "198.51.100.9")
            }
            // ... the owner at theirs signs in.
            _ = try await auth.signIn(login: user.email, ip: "203.0.113.5")
        }
    }

    @Test func aCampaignFromManyAddressesHoldsTheAccount() async throws {
        try await AuthHarness.with(configure: { $0.signInFailuresPerHour = 10 }) { auth in
            let user = try await auth.activeUser()
            for bot in 0..<10 {
                await expectRPCError(.unauthenticated, reason: "INVALID_CREDENTIALS") {
                    _ = try await auth.signIn(login: user.email, password: "wrong password!", ip: "198.51.100.\(bot)")
                }
            }
            await expectRPCError(.resourceExhausted, reason: "RATE_LIMITED") {
                _ = try await auth.signIn(login: user.email, ip: "203.0.113.5")
            }
            auth.clock.advance(seconds: 3601)
            _ = try await auth.signIn(login: user.email, ip: "203.0.113.5")
        }
    }

    @Test func signInLimitPerClientAddress() async throws {
        try await AuthHarness.with(configure: { $0.ipRequestsPerMinute = 3 }) { auth in
            let user = try await auth.activeUser()
            for _ in 0..<3 { _ = try await auth.signIn(login: user.email, ip: "203.0.113.7") }
            await expectRPCError(.resourceExhausted, reason: "RATE_LIMITED") {
                _ = try await auth.signIn(login: user.email, ip: "203.0.113.7")
            }
            _ = try await auth.signIn(login: user.email, ip: "203.0.113.8")
        }
    }

    @Test func oldParametersAreRehashedOnSignIn() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            let old = try Argon2id(parameters: .init(memoryKiB: 32, iterations: 2, parallelism: 1)).hash(
                password: "correct horse battery"
            )
            try await auth.database.execute(
                "UPDATE accounts SET password_hash = \(old) WHERE id = \(user.account.userId)"
            )
            _ = try await auth.signIn(login: user.email)
            let now = try await auth.database.query(
                "SELECT password_hash FROM accounts WHERE id = \(user.account.userId)"
            ).scalar(String.self)
            #expect(now != old)
            #expect(now.hasPrefix("$argon2id$v=19$m=64,t=1,p=1$"))
        }
    }

    @Test func realOWASPParameters() async throws {
        try await AuthHarness.with(realArgon2: true) { auth in
            let user = try await auth.activeUser()
            let hash = try await auth.database.query(
                "SELECT password_hash FROM accounts WHERE id = \(user.account.userId)"
            ).scalar(String.self)
            #expect(hash.hasPrefix("$argon2id$v=19$m=19456,t=2,p=1$"))
            await expectRPCError(.unauthenticated) {
                _ = try await auth.signIn(login: user.email, password: "not the password")
            }
            _ = try await auth.signIn(login: user.username)
        }
    }
}
