import Foundation
import KindredGRPC
import KindredIdentity
import KindredOpenSSL
import Testing

@Suite("Ended sessions: the revocation state and the authenticator's check")
struct RevocationTests {
    let start = ContinuousClock.now
    let nowMs: Int64 = 1_800_000_000_000

    @Test("fail closed: unknown before the first sync and after the bound; revoked wins; reset forgets")
    func stateMachine() {
        var state = RevocationState(staleAfter: .seconds(5))
        #expect(state.verdict("s1", now: self.start) == .unknown)
        // A snapshot in two chunks: only the last one (synced) makes the set trusted.
        state.apply(reset: true, sessions: [("old", self.nowMs + 60_000)], synced: false, now: self.start, nowMs: self.nowMs)
        #expect(state.verdict("s1", now: self.start) == .unknown)
        #expect(state.verdict("old", now: self.start) == .revoked)
        state.apply(reset: false, sessions: [("s2", self.nowMs + 60_000)], synced: true, now: self.start, nowMs: self.nowMs)
        #expect(state.verdict("s1", now: self.start) == .live)
        #expect(state.verdict("s2", now: self.start) == .revoked)
        #expect(state.verdict("old", now: self.start) == .revoked)
        // Silence past the bound: unknown (but a known end stays revoked).
        #expect(state.verdict("s1", now: self.start + .seconds(5)) == .live)
        #expect(state.verdict("s1", now: self.start + .milliseconds(5001)) == .unknown)
        #expect(state.verdict("s2", now: self.start + .seconds(60)) == .revoked)
        // A heartbeat makes it trusted again.
        state.apply(reset: false, sessions: [], synced: true, now: self.start + .seconds(60), nowMs: self.nowMs)
        #expect(state.verdict("s1", now: self.start + .seconds(61)) == .live)
        // Already expired entries are not kept; a reset (new snapshot) forgets the old set.
        state.apply(reset: false, sessions: [("gone", self.nowMs - 1)], synced: true, now: self.start, nowMs: self.nowMs)
        #expect(state.verdict("gone", now: self.start) == .live)
        // A new snapshot in chunks: the old set stays trusted until it is complete, and both count as ended.
        state.apply(reset: true, sessions: [("s3", self.nowMs + 1000)], synced: false, now: self.start, nowMs: self.nowMs)
        #expect(state.verdict("s1", now: self.start) == .live)
        #expect(state.verdict("s2", now: self.start) == .revoked)
        #expect(state.verdict("s3", now: self.start) == .revoked)
        state.apply(reset: false, sessions: [], synced: true, now: self.start, nowMs: self.nowMs)
        #expect(state.verdict("s2", now: self.start) == .live)
        #expect(state.verdict("s3", now: self.start) == .revoked)
        #expect(state.count == 1)
    }

    @Test("CallerAuthenticator: an ended session is UNAUTHENTICATED, a stale set UNAVAILABLE, cached tokens included")
    func authenticatorChecksEveryCall() async throws {
        let signer = AccessTokenSigner(keyID: "k1", key: try Ed25519PrivateKey())
        let now = Int64(Date().timeIntervalSince1970)
        func token(session: String?, subject: String = "user-1") throws -> String {
            try signer.sign(
                AccessTokenClaims(
                    subject: subject,
                    issuedAt: now,
                    lifetimeSeconds: 900,
                    tokenID: UUID().uuidString,
                    sessionID: session,
                    roles: session == nil ? ["service"] : ["user"]
                )
            )
        }
        let revocations = RevokedSessions(staleAfter: .seconds(1))
        let authenticator = CallerAuthenticator(keys: ["k1": signer.publicKey], revocations: revocations)
        let user = "Bearer " + (try token(session: "s1"))
        let service = "Bearer " + (try token(session: nil, subject: "service:gateway"))

        // Never synced: user tokens are refused with UNAVAILABLE; service tokens (no session) pass.
        await #expect(throws: RPCError.self) { _ = try await authenticator.authenticate(authorization: user) }
        do {
            _ = try await authenticator.authenticate(authorization: user)
        } catch {
            #expect(error.code == .unavailable)
            #expect(error.message == CallerAuthenticator.sessionCheckUnavailable)
        }
        _ = try await authenticator.authenticate(authorization: service)

        revocations.apply(reset: true, sessions: [], synced: true)
        #expect(try await authenticator.authenticate(authorization: user).sessionID == "s1")  // now cached
        revocations.apply(reset: false, sessions: [("s1", (now + 900) * 1000)], synced: true)
        do {
            _ = try await authenticator.authenticate(authorization: user)
            Issue.record("an ended session's cached token was accepted")
        } catch {
            #expect(error.code == .unauthenticated)
        }
        // Signing out again is idempotent: the session check can be skipped for that.
        _ = try await authenticator.authenticate(authorization: user, checkingSession: false)

        // Another session, then silence past the bound.
        let other = "Bearer " + (try token(session: "s2"))
        _ = try await authenticator.authenticate(authorization: other)
        try await Task.sleep(for: .milliseconds(1100))
        do {
            _ = try await authenticator.authenticate(authorization: other)
            Issue.record("a stale set was trusted")
        } catch {
            #expect(error.code == .unavailable)
        }
    }
}

/// ns per `authenticate` of a cached token, without and with the ended-sessions check. Prints, never asserts.
/// `KINDRED_IDENTITY_BENCH=1 swift test --filter RevocationBenchmarks` (add `-c release` for real figures).
@Suite(.enabled(if: ProcessInfo.processInfo.environment["KINDRED_IDENTITY_BENCH"] != nil))
struct RevocationBenchmarks {
    @Test func cachedTokenCheck() async throws {
        let signer = AccessTokenSigner(keyID: "k1", key: try Ed25519PrivateKey())
        let now = Int64(Date().timeIntervalSince1970)
        let token = try signer.sign(
            AccessTokenClaims(
                subject: "user-1", issuedAt: now, lifetimeSeconds: 900, tokenID: "t", sessionID: UUID().uuidString,
                roles: ["user"]
            )
        )
        let revocations = RevokedSessions()
        revocations.apply(
            reset: true,
            sessions: (0..<10_000).map { _ in (UUID().uuidString.lowercased(), (now + 900) * 1000) },
            synced: true
        )
        for (label, authenticator) in [
            ("without revocation check", CallerAuthenticator(keys: ["k1": signer.publicKey])),
            ("with 10,000 ended sessions", CallerAuthenticator(keys: ["k1": signer.publicKey], revocations: revocations)),
        ] {
            let header = "Bearer " + token
            _ = try await authenticator.authenticate(authorization: header)
            var best = Double.infinity
            for _ in 0..<5 {
                let iterations = 100_000
                let start = ContinuousClock.now
                for _ in 0..<iterations { _ = try await authenticator.authenticate(authorization: header, now: now) }
                let elapsed = ContinuousClock.now - start
                best = min(best, (Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9) / Double(iterations))
            }
            print("bench authenticate (cached token) \(label): \(String(format: "%.0f", best)) ns/op")
        }
    }
}
