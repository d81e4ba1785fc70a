import Foundation
import KindredGRPC
import KindredOpenSSL
import KindredProto
import KindredTestSupport
import Testing

@testable import KindredAuth

@Suite("SignInWithIdToken")
struct IdTokenTests {
    /// Writes a JWKS into `directory` and returns ID tokens for `claims`, signed by `python/id_tokens.py`.
    static func makeTokens(_ claims: [[String: Any]], directory: String) async throws -> [String] {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "python/id_tokens.py"
        ).path
        let signed = try await runPython(
            script, [directory + "/jwks.json"], input: try JSONSerialization.data(withJSONObject: claims))
        guard signed.status == 0 else { throw TestSetupError(message: "id_tokens.py failed (cryptography installed?)") }
        return try JSONDecoder().decode([String].self, from: signed.standardOutput)
    }

    static func nonceHash(_ nonce: String) -> String {
        SHA256.hash(Array(nonce.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    static func claims(sub: String, email: String?, nonce: String, aud: String = "kindred-ios") -> [String: Any] {
        let now = Int(Date().timeIntervalSince1970)
        var claims: [String: Any] = [
            "iss": "https://accounts.google.com", "sub": sub, "aud": aud, "iat": now, "exp": now + 600,
            "nonce": nonceHash(nonce),
        ]
        if let email { claims["email"] = email; claims["email_verified"] = true }
        return claims
    }

    @Test func createsLinksAndRejects() async throws {
        let directory = NSTemporaryDirectory() + "kindred-auth-oidc-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let newEmail = AuthHarness.uniqueEmail("google")
        let existingEmail = AuthHarness.uniqueEmail("existing")
        let nonces = (0..<5).map { _ in UUID().uuidString }
        let tokens = try await Self.makeTokens(
            [
                Self.claims(sub: "g-1", email: newEmail, nonce: nonces[0]),
                Self.claims(sub: "g-1", email: newEmail, nonce: nonces[1]),
                Self.claims(sub: "g-2", email: existingEmail, nonce: nonces[2]),
                Self.claims(sub: "g-3", email: nil, nonce: nonces[3], aud: "someone-else"),
            ],
            directory: directory
        )
        try await AuthHarness.with(configure: {
            $0.oidcAudiences = ["kindred-ios"]
            $0.oidcJWKSFile = directory + "/jwks.json"
        }) { auth in
            func request(_ token: String, _ nonce: String) -> Kindred.Auth.V1.SignInWithIdTokenRequest {
                var request = Kindred.Auth.V1.SignInWithIdTokenRequest()
                request.communityId = auth.community
                request.provider = .google
                request.idToken = token
                request.nonce = nonce
                return request
            }
            let created = try await auth.call(Auth.signInWithIdToken, request(tokens[0], nonces[0]))
            #expect(created.accountCreated && !created.identityLinked)
            #expect(
                created.account?.email == newEmail && created.account?.passwordSet == false
                    && created.account?.status == .active
            )
            // The same nonce again is refused (replay); a new nonce signs in to the same account.
            await expectRPCError(.unauthenticated) {
                _ = try await auth.call(Auth.signInWithIdToken, request(tokens[0], nonces[0]))
            }
            let again = try await auth.call(Auth.signInWithIdToken, request(tokens[1], nonces[1]))
            #expect(!again.accountCreated && again.account?.userId == created.account?.userId)
            let sessions = try await auth.call(Auth.listSessions, .init(), token: again.tokens!.accessToken)
            #expect(sessions.sessions.allSatisfy { $0.signInMethod == .google })

            // An existing verified account with the same email gets the identity linked.
            let existing = try await auth.activeUser(email: existingEmail)
            let linked = try await auth.call(Auth.signInWithIdToken, request(tokens[2], nonces[2]))
            #expect(linked.identityLinked && linked.account?.userId == existing.account.userId)

            // ChangeEmail without a password: fine in a fresh SignInWithIdToken session, refused once it is older
            // than the window; a password account signed in through its provider still gives its password.
            var change = Kindred.Auth.V1.ChangeEmailRequest()
            change.newEmail = AuthHarness.uniqueEmail("moved")
            _ = try await auth.call(Auth.changeEmail, change, token: again.tokens!.accessToken)
            try await auth.database.execute(
                "UPDATE sessions SET created_at = now() - interval '11 minutes' WHERE id = \(again.tokens!.sessionId)"
            )
            await expectRPCError(.failedPrecondition, reason: "REAUTHENTICATION_REQUIRED") {
                _ = try await auth.call(Auth.changeEmail, change, token: again.tokens!.accessToken)
            }
            await expectRPCError(.failedPrecondition, reason: "REAUTHENTICATION_REQUIRED") {
                _ = try await auth.call(Auth.changeEmail, change, token: linked.tokens!.accessToken)
            }

            // Wrong audience, wrong nonce.
            await expectRPCError(.unauthenticated) {
                _ = try await auth.call(Auth.signInWithIdToken, request(tokens[3], nonces[3]))
            }
            await expectRPCError(.unauthenticated) {
                _ = try await auth.call(Auth.signInWithIdToken, request(tokens[1], nonces[4]))
            }
        }
    }

    @Test("the providers' keys come from their JWKS URL (over HTTPS, cached) when no key file is set")
    func keysFromJWKSURL() async throws {
        let keys = try await PeerKeys.shared()
        let directory = NSTemporaryDirectory() + "kindred-auth-oidc-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let email = AuthHarness.uniqueEmail("jwks-url")
        let nonces = (0..<2).map { _ in UUID().uuidString }
        let tokens = try await Self.makeTokens(
            [Self.claims(sub: "u-1", email: email, nonce: nonces[0]), Self.claims(sub: "u-1", email: email, nonce: nonces[1])],
            directory: directory
        )
        let peer = try await Peer.start("jwks_peer.py", keys: keys, arguments: ["--jwks", directory + "/jwks.json"])
        defer { peer.stop() }
        try await AuthHarness.with(configure: {
            $0.oidcAudiences = ["kindred-ios"]
            $0.oidcJWKSURLs = ["https://127.0.0.1:\(peer.port)/oauth2/v3/certs"]
            $0.oidcJWKSCAFile = keys.caFile
        }) { auth in
            for (token, nonce) in zip(tokens, nonces) {
                var request = Kindred.Auth.V1.SignInWithIdTokenRequest()
                request.communityId = auth.community
                request.provider = .google
                request.idToken = token
                request.nonce = nonce
                let response = try await auth.call(Auth.signInWithIdToken, request)
                #expect(response.account?.email == email)
            }
        }
        // Fetched once for both sign-ins (the peer says max-age=3600).
        #expect(try peer.records().count == 1)
    }

    @Test func aClosedCommunityCreatesNoAccountButLinksAnExistingOne() async throws {
        let directory = NSTemporaryDirectory() + "kindred-auth-oidc-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let newEmail = AuthHarness.uniqueEmail("closed-new")
        let existingEmail = AuthHarness.uniqueEmail("closed-existing")
        let nonces = (0..<2).map { _ in UUID().uuidString }
        let tokens = try await Self.makeTokens(
            [
                Self.claims(sub: "c-1", email: newEmail, nonce: nonces[0]),
                Self.claims(sub: "c-2", email: existingEmail, nonce: nonces[1]),
            ],
            directory: directory
        )
        try await AuthHarness.with(configure: {
            $0.oidcAudiences = ["kindred-ios"]
            $0.oidcJWKSFile = directory + "/jwks.json"
        }) { auth in
            func request(_ token: String, _ nonce: String) -> Kindred.Auth.V1.SignInWithIdTokenRequest {
                var request = Kindred.Auth.V1.SignInWithIdTokenRequest()
                request.communityId = auth.community
                request.provider = .google
                request.idToken = token
                request.nonce = nonce
                return request
            }
            let existing = try await auth.activeUser(email: existingEmail)
            // What profile's CommunityUpdated leaves when an admin closes the community.
            try await auth.database.execute(
                "INSERT INTO communities (community_id, sign_up_open, version) VALUES (\(auth.community), false, 2)"
            )
            await expectRPCError(.failedPrecondition, reason: "SIGN_UP_CLOSED") {
                _ = try await auth.call(Auth.signInWithIdToken, request(tokens[0], nonces[0]))
            }
            let accounts = try await auth.database.query("SELECT count(*) FROM accounts WHERE email = \(newEmail)")
            #expect(try accounts[0].decode(Int64.self, at: 0) == 0)
            let linked = try await auth.call(Auth.signInWithIdToken, request(tokens[1], nonces[1]))
            #expect(linked.identityLinked && linked.account?.userId == existing.account.userId)
        }
    }
}
