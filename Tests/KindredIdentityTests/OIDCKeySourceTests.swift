import Foundation
import KindredTestSupport
import Logging
import Testing

@testable import KindredIdentity

/// OIDC keys fetched over HTTPS (HTTP2Client) from `Tests/Peers/jwks_peer.py`, an independent JWKS endpoint
/// (Python h2 over TLS) that serves a key file the test can rotate, with Cache-Control max-age, and records fetches.
@Suite("OIDC keys from a JWKS endpoint", .serialized)
struct OIDCKeySourceTests {
    struct Fixture: Decodable {
        let now: Int64
        let tokens: [String: String]
    }

    /// Keys and ID tokens from python/make_id_tokens.py: the JWKS (rsa-1, ec-1) as JSON, and the tokens.
    static func fixture() async throws -> (jwks: [String: Any], fixture: Fixture) {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("python/make_id_tokens.py").path
        let output = try await runPython(script, [])
        guard output.status == 0 else { throw PeerFailure("make_id_tokens.py failed: \(output.errorText)") }
        let object = try JSONSerialization.jsonObject(with: output.standardOutput) as! [String: Any]
        return (object["jwks"] as! [String: Any], try JSONDecoder().decode(Fixture.self, from: output.standardOutput))
    }

    /// The JWKS with key ids renamed (the same key material under a new id: a rotation the token "unknown_kid",
    /// signed by rsa-1's key as "rsa-9", verifies against).
    static func write(_ jwks: [String: Any], renaming: [String: String] = [:], to path: String) throws {
        var copy = jwks
        copy["keys"] = (jwks["keys"] as! [[String: Any]]).map { key in
            var key = key
            if let kid = key["kid"] as? String, let renamed = renaming[kid] { key["kid"] = renamed }
            return key
        }
        let temporary = path + ".new"
        try JSONSerialization.data(withJSONObject: copy).write(to: URL(fileURLWithPath: temporary))
        _ = rename(temporary, path)
    }

    func withPeer(maxAge: Int, _ body: (PeerKeys, Peer, [String: Any], Fixture, String) async throws -> Void) async throws {
        let keys = try await PeerKeys.shared()
        let (jwks, fixture) = try await Self.fixture()
        let file = keys.folder + "/jwks-\(UUID().uuidString).json"
        try Self.write(jwks, to: file)
        let peer = try await Peer.start("jwks_peer.py", keys: keys, arguments: ["--jwks", file, "--max-age", String(maxAge)])
        defer { peer.stop() }
        try await body(keys, peer, jwks, fixture, file)
    }

    func source(_ keys: PeerKeys, _ peer: Peer, clock: TestClock) throws -> OIDCKeySource {
        let configuration = OIDCKeySource.Configuration(
            urls: ["https://127.0.0.1:\(peer.port)/oauth2/v3/certs"],
            trustRootsFile: keys.caFile
        )
        return try OIDCKeySource(configuration: configuration, logger: Logger(label: "kindred.oidc.test"), clock: { clock.now })
    }

    static func verifier(_ keySet: JSONWebKeySet) -> IDTokenVerifier {
        IDTokenVerifier(issuers: ["https://accounts.google.com", "https://appleid.apple.com"], audiences: ["kindred-ios"], keySet: keySet)
    }

    @Test("keys are fetched once and kept for the endpoint's max-age, then fetched again; tokens verify against them")
    func cachedForMaxAge() async throws {
        try await withPeer(maxAge: 3600) { keys, peer, _, fixture, _ in
            let clock = TestClock(Date())
            let source = try self.source(keys, peer, clock: clock)
            let first = await source.keySet()
            #expect(first.keyIDs == ["ec-1", "rsa-1"])
            let claims = try Self.verifier(first).verify(fixture.tokens["rs256"]!, nonce: "n-0S6_WzA2Mj", now: fixture.now)
            #expect(claims.subject == "google-user-1")
            for _ in 0..<5 { _ = await source.keySet() }
            clock.advance(by: 3599)
            _ = await source.keySet()
            #expect(try peer.records().count == 1)
            clock.advance(by: 2)
            #expect(await source.keySet().keyIDs == ["ec-1", "rsa-1"])
            #expect(try peer.records().count == 2)
            await source.close()
        }
    }

    @Test("a token with an unknown key id fetches the keys again (a rotation), at most once per minimum interval")
    func unknownKeyRefreshesRateLimited() async throws {
        try await withPeer(maxAge: 3600) { keys, peer, jwks, fixture, file in
            let clock = TestClock(Date())
            let source = try self.source(keys, peer, clock: clock)
            _ = await source.keySet()
            // The provider rotates rsa-1 to rsa-9 well within its max-age.
            try Self.write(jwks, renaming: ["rsa-1": "rsa-9"], to: file)
            let token = fixture.tokens["unknown_kid"]!
            let stale = await source.keySet()
            #expect(throws: TokenError(.unknownKey)) {
                try Self.verifier(stale).verify(token, nonce: nil, now: fixture.now)
            }
            // Within the minimum interval: made-up key ids cause no fetch.
            for kid in ["rsa-9", "x", "y", "z"] { _ = await source.keySet(afterUnknownKey: kid) }
            #expect(try peer.records().count == 1)
            clock.advance(by: 61)
            let rotated = await source.keySet(afterUnknownKey: "rsa-9")
            #expect(rotated.keyIDs == ["ec-1", "rsa-9"])
            #expect(try Self.verifier(rotated).verify(token, nonce: "n-0S6_WzA2Mj", now: fixture.now).subject == "google-user-1")
            #expect(try peer.records().count == 2)
            // A known key id fetches nothing.
            clock.advance(by: 61)
            _ = await source.keySet(afterUnknownKey: "rsa-9")
            #expect(try peer.records().count == 2)
            await source.close()
        }
    }

    @Test("without max-age the keys are kept an hour; a failed fetch keeps the keys already known")
    func defaultAgeAndFailures() async throws {
        try await withPeer(maxAge: -1) { keys, peer, _, _, _ in
            let clock = TestClock(Date())
            let source = try self.source(keys, peer, clock: clock)
            _ = await source.keySet()
            clock.advance(by: 3500)
            _ = await source.keySet()
            #expect(try peer.records().count == 1)
            peer.stop()
            clock.advance(by: 200)
            #expect(await source.keySet().keyIDs == ["ec-1", "rsa-1"])
            await source.close()
        }
    }

    @Test("keys of the file and of the endpoints are merged")
    func fileAndEndpoint() async throws {
        try await withPeer(maxAge: 60) { keys, peer, jwks, _, _ in
            let fileSet = try JSONWebKeySet(json: try JSONSerialization.data(
                withJSONObject: ["keys": (jwks["keys"] as! [[String: Any]]).map { var key = $0; key["kid"] = "file-\(key["kid"]!)"; return key }]))
            let configuration = OIDCKeySource.Configuration(urls: ["https://127.0.0.1:\(peer.port)/oauth2/v3/certs"], trustRootsFile: keys.caFile)
            let source = try OIDCKeySource(configuration: configuration, fileKeys: fileSet, logger: Logger(label: "t"))
            #expect(await source.keySet().keyIDs == ["ec-1", "file-ec-1", "file-rsa-1", "rsa-1"])
            await source.close()
        }
    }

    @Test("Cache-Control: max-age is read; no-store and no-cache count as zero", arguments: [
        ("public, max-age=19848, must-revalidate, no-transform", 19848), ("max-age=\"60\"", 60), ("private", nil),
        ("no-store", 0), ("no-cache, max-age=100", 0), ("max-age=-5", nil),
    ] as [(String, Int?)])
    func cacheControl(_ header: String, _ seconds: Int?) {
        #expect(CacheControl.maxAge(header) == seconds.map { .seconds($0) })
    }
}
