import Foundation
import KindredTestSupport
import KindredGRPC
@testable import KindredIdentity
import KindredOpenSSL
import Synchronization
import Testing

@Suite struct AccessTokenTests {
    let signer: AccessTokenSigner
    let verifier: AccessTokenVerifier
    let now: Int64 = 1_800_000_000

    init() throws {
        self.signer = AccessTokenSigner(keyID: "k1", key: try Ed25519PrivateKey())
        self.verifier = AccessTokenVerifier(keys: ["k1": self.signer.publicKey])
    }

    func claims(issuedAt: Int64? = nil, lifetime: Int64 = 900, audience: String = "kindred", issuer: String = "kindred-auth")
        -> AccessTokenClaims
    {
        AccessTokenClaims(
            issuer: issuer,
            subject: "user-1",
            audience: audience,
            issuedAt: issuedAt ?? self.now,
            lifetimeSeconds: lifetime,
            tokenID: "t1",
            sessionID: "s1",
            roles: ["user"]
        )
    }

    @Test func roundTrip() throws {
        let token = try self.signer.sign(self.claims())
        let verified = try self.verifier.verify(token, now: self.now + 10)
        #expect(verified == self.claims())
        #expect(AccessTokenVerifier.keyID(of: token) == "k1")
    }

    @Test func lifetimeIsCappedAtFifteenMinutes() {
        let claims = self.claims(lifetime: 3600)
        #expect(claims.exp - claims.iat == 900)
    }

    @Test func expiryAndNotBeforeUseASmallLeeway() throws {
        let token = try self.signer.sign(self.claims())
        _ = try self.verifier.verify(token, now: self.now + 900 + 20)
        #expect(throws: TokenError(.expired)) { try self.verifier.verify(token, now: self.now + 900 + 31) }
        _ = try self.verifier.verify(token, now: self.now - 20)
        #expect(throws: TokenError(.notYetValid)) { try self.verifier.verify(token, now: self.now - 31) }
    }

    @Test func wrongAudienceIssuerOrKeyIsRefused() throws {
        #expect(throws: TokenError(.wrongAudience)) {
            try self.verifier.verify(try self.signer.sign(self.claims(audience: "other")), now: self.now)
        }
        #expect(throws: TokenError(.wrongIssuer)) {
            try self.verifier.verify(try self.signer.sign(self.claims(issuer: "evil")), now: self.now)
        }
        let stranger = AccessTokenSigner(keyID: "k1", key: try Ed25519PrivateKey())
        #expect(throws: TokenError(.badSignature)) { try self.verifier.verify(try stranger.sign(self.claims()), now: self.now) }
        let rotated = AccessTokenSigner(keyID: "k2", key: try Ed25519PrivateKey())
        #expect(throws: TokenError(.unknownKey)) { try self.verifier.verify(try rotated.sign(self.claims()), now: self.now) }
    }

    @Test func tamperingAndAlgorithmSubstitutionAreRefused() throws {
        let token = try self.signer.sign(self.claims())
        var parts = token.split(separator: ".").map(String.init)
        // Raise the roles in the payload, keep the signature.
        var payload = try JSONSerialization.jsonObject(with: Data(Base64URL.decode(parts[1])!)) as! [String: Any]
        payload["roles"] = ["admin"]
        parts[1] = Base64URL.encode(try JSONSerialization.data(withJSONObject: payload))
        #expect(throws: TokenError(.badSignature)) { try self.verifier.verify(parts.joined(separator: "."), now: self.now) }

        for alg in ["none", "HS256", "RS256"] {
            let header = Base64URL.encode(Array("{\"alg\":\"\(alg)\",\"kid\":\"k1\"}".utf8))
            let forged = "\(header).\(token.split(separator: ".")[1])."
            #expect(throws: TokenError(.unsupportedAlgorithm)) { try self.verifier.verify(forged, now: self.now) }
        }
    }

    @Test(arguments: ["", "a.b", "a.b.c.d", "!!.??.**", String(repeating: "a", count: 9000)])
    func malformedTokensAreRefused(token: String) {
        #expect(throws: TokenError.self) { try self.verifier.verify(token, now: self.now) }
    }

    /// Before auth's keys were ever fetched (a service just started, auth not answering yet), a valid token is
    /// refused as UNAVAILABLE, which clients retry, not UNAUTHENTICATED, which signs a member out.
    @Test func aTokenIsRetryableUntilTheFirstKeysArrive() async throws {
        let answering = Mutex(false)
        let signer = self.signer
        let authenticator = CallerAuthenticator(refetchInterval: .milliseconds(1)) {
            guard answering.withLock({ $0 }) else { throw RPCError(.unavailable, "auth is not answering") }
            return ["k1": signer.publicKey]
        }
        let claims = AccessTokenClaims(
            subject: "user-4", issuedAt: Int64(Date().timeIntervalSince1970), lifetimeSeconds: 900, tokenID: "t",
            sessionID: "s", roles: ["user"])
        let header = "Bearer \(try signer.sign(claims))"
        await #expect(throws: RPCError(.unavailable, CallerAuthenticator.keysUnavailable)) {
            _ = try await authenticator.authenticate(authorization: header)
        }
        answering.withLock { $0 = true }
        try await Task.sleep(for: .milliseconds(5))  // past the refetch interval
        #expect(try await authenticator.authenticate(authorization: header).userID == "user-4")
    }

    @Test func authenticatorRefetchesKeysOnAnUnknownKeyID() async throws {
        let rotated = AccessTokenSigner(keyID: "k2", key: try Ed25519PrivateKey())
        let fetches = FetchCounter()
        let signer = self.signer
        let authenticator = CallerAuthenticator(refetchInterval: .seconds(30)) {
            fetches.increment()
            return ["k1": signer.publicKey, "k2": rotated.publicKey]
        }
        let fresh = AccessTokenClaims(
            subject: "user-2",
            issuedAt: Int64(Date().timeIntervalSince1970),
            lifetimeSeconds: 900,
            tokenID: "t",
            sessionID: "s",
            roles: ["user", "admin"]
        )
        let identity = try await authenticator.authenticate(authorization: "Bearer \(try rotated.sign(fresh))")
        #expect(identity.userID == "user-2")
        #expect(identity.isAdmin)
        _ = try await authenticator.authenticate(authorization: "Bearer \(try signer.sign(fresh))")
        #expect(fetches.value == 1)
        // An unknown key id refetches at most once per interval, so forged kids cannot flood auth.
        let unknown = AccessTokenSigner(keyID: "k9", key: try Ed25519PrivateKey())
        for _ in 0..<5 {
            await #expect(throws: RPCError.self) {
                _ = try await authenticator.authenticate(authorization: "Bearer \(try unknown.sign(fresh))")
            }
        }
        #expect(fetches.value == 1)
        await #expect(throws: RPCError(.unauthenticated, "Authorization must be a Bearer token")) {
            _ = try await authenticator.authenticate(authorization: "Basic abc")
        }
    }

    @Test func verifiedTokensAreCachedButStillExpire() async throws {
        let authenticator = CallerAuthenticator(keys: ["k1": self.signer.publicKey])
        let issued = Int64(Date().timeIntervalSince1970)
        let claims = AccessTokenClaims(
            subject: "user-3", issuedAt: issued, lifetimeSeconds: 900, tokenID: "t", sessionID: "s", roles: ["user"])
        let header = "Bearer \(try self.signer.sign(claims))"
        #expect(try await authenticator.authenticate(authorization: header, now: issued).userID == "user-3")
        // Second time from the cache: same identity.
        #expect(try await authenticator.authenticate(authorization: header, now: issued + 60).userID == "user-3")
        // Past exp (+ leeway) the cached token is refused like any expired one.
        await #expect(throws: RPCError.self) {
            _ = try await authenticator.authenticate(authorization: header, now: issued + 900 + 31)
        }
        // A token differing in one signature character is verified on its own, not matched to the cached one.
        var forged = Array(header)
        forged[forged.count - 2] = forged[forged.count - 2] == "A" ? "B" : "A"
        await #expect(throws: RPCError.self) {
            _ = try await authenticator.authenticate(authorization: String(forged), now: issued)
        }
    }
}

extension AccessTokenTests {
    /// Clients refresh their tokens every ten minutes (they live fifteen): the verified tokens the authenticator
    /// holds stay near two per client, however long it serves, instead of gaining one per client per refresh.
    @Test func expiredTokensLeaveTheCache() async throws {
        let authenticator = CallerAuthenticator(keys: ["k1": self.signer.publicKey])
        let clients = 300
        var held: [Int] = []
        for generation in 0..<10 {
            let issued = self.now + Int64(generation) * 600
            for client in 0..<clients {
                let claims = AccessTokenClaims(
                    subject: "user-\(client)", issuedAt: issued, lifetimeSeconds: 900, tokenID: "t\(generation)",
                    sessionID: "s\(client)", roles: ["user"])
                let header = "Bearer \(try self.signer.sign(claims))"
                _ = try await authenticator.authenticate(authorization: header, now: issued)
            }
            held.append(authenticator.cachedTokenCount)
        }
        // The token in use and the one it replaced, which is still valid: two per client.
        #expect(held.allSatisfy { $0 <= 2 * clients }, "tokens held after each refresh: \(held)")
    }
}

final class FetchCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { self.lock.withLock { self.count += 1 } }
    var value: Int { self.lock.withLock { self.count } }
}

@Suite struct IDTokenTests {
    struct Fixture: Decodable {
        let now: Int64
        let tokens: [String: String]
    }

    let fixture: Fixture
    let verifier: IDTokenVerifier

    /// Keys and tokens are made once per test run (RSA key generation takes a while).
    /// Awaited, never waited for on a cooperative thread (KindredTestSupport).
    static let generated = Task { try await offThePool { try Self.generate() } }

    init() async throws {
        (self.fixture, self.verifier) = try await Self.generated.value
    }

    private static func generate() throws -> (Fixture, IDTokenVerifier) {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("python/make_id_tokens.py")
        let process = Process()
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script.path]
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TokenError(.malformed)  // python3 with `cryptography` is required (services/install-deps.sh)
        }
        let fixture = try JSONDecoder().decode(Fixture.self, from: data)
        let jwks = try JSONSerialization.jsonObject(with: data) as! [String: Any]
        let keySet = try JSONWebKeySet(json: try JSONSerialization.data(withJSONObject: jwks["jwks"]!))
        let verifier = IDTokenVerifier(
            issuers: ["https://accounts.google.com", "https://appleid.apple.com"],
            audiences: ["kindred-ios"],
            keySet: keySet
        )
        return (fixture, verifier)
    }

    @Test func keySetKeepsOnlySignatureKeysItCanUse() {
        #expect(self.verifier.keySet.keyIDs == ["ec-1", "rsa-1"])
    }

    @Test func validRS256AndES256Tokens() throws {
        let google = try self.verifier.verify(self.fixture.tokens["rs256"]!, nonce: "n-0S6_WzA2Mj", now: self.fixture.now)
        #expect(google.subject == "google-user-1")
        #expect(google.email == "Anna@Example.com")
        #expect(google.emailVerified)
        let apple = try self.verifier.verify(self.fixture.tokens["es256"]!, nonce: "n-0S6_WzA2Mj", now: self.fixture.now)
        #expect(apple.issuer == "https://appleid.apple.com")
        #expect(apple.emailVerified)
    }

    @Test(arguments: [
        ("expired", TokenError(.expired)), ("wrong_audience", TokenError(.wrongAudience)),
        ("wrong_issuer", TokenError(.wrongIssuer)), ("wrong_key", TokenError(.badSignature)),
        ("unknown_kid", TokenError(.unknownKey)), ("alg_none", TokenError(.unsupportedAlgorithm)),
        ("alg_mismatch", TokenError(.unsupportedAlgorithm)), ("no_nonce", TokenError(.wrongNonce)),
    ])
    func invalidTokensAreRefused(name: String, error: TokenError) {
        #expect(throws: error) {
            try self.verifier.verify(self.fixture.tokens[name]!, nonce: "n-0S6_WzA2Mj", now: self.fixture.now)
        }
    }

    @Test func wrongNonceIsRefused() {
        #expect(throws: TokenError(.wrongNonce)) {
            try self.verifier.verify(self.fixture.tokens["rs256"]!, nonce: "another", now: self.fixture.now)
        }
    }
}
