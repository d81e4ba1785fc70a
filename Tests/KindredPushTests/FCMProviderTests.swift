import Foundation
import KindredPush
import KindredTestSupport
import Logging
import Testing

/// The FCM provider against `Tests/Peers/fcm_peer.py`, an independent HTTP/2 TLS server (h2 + cryptography) with
/// Google's token endpoint (it verifies the RS256 assertion against the service account's public key) and FCM's
/// `messages:send` (it accepts only access tokens it issued).
@Suite("FCM provider against the FCM peer", .serialized)
struct FCMProviderTests {
    static let project = "kindred-test"
    static let clientEmail = "push@kindred-test.iam.gserviceaccount.com"

    func withPeer(_ body: (PeerKeys, Peer) async throws -> Void) async throws {
        let keys = try await PeerKeys.shared()
        let port = try unusedPort()
        let peer = try await Peer.start(
            "fcm_peer.py",
            keys: keys,
            arguments: ["--port", String(port), "--public-key", keys.fcmPublicKey, "--client-email", Self.clientEmail,
                        "--token-uri", Self.tokenURL(port), "--project", Self.project]
        )
        defer { peer.stop() }
        try await body(keys, peer)
    }

    func provider(
        _ keys: PeerKeys,
        _ peer: Peer,
        account: String? = nil,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) throws -> FCMProvider {
        var configuration = FCMConfiguration(serviceAccountFile: account ?? keys.fcmServiceAccount)
        configuration.baseURL = "https://127.0.0.1:\(peer.port)"
        // The peer's port is this test's: the token endpoint (and the assertion's aud) overrides the key file's.
        configuration.tokenURL = Self.tokenURL(peer.port)
        configuration.trustRootsFile = keys.caFile
        return try FCMProvider(configuration: configuration, logger: Logger(label: "kindred.push.test"), clock: clock)
    }

    static func tokenURL(_ port: Int) -> String { "https://127.0.0.1:\(port)/token" }

    static func registrationToken() -> String {
        "fcm-" + UUID().uuidString.lowercased() + ":APA91b" + String(Int.random(in: 100_000...999_999))
    }

    static func notification() -> PushNotification {
        PushNotification(
            id: UUID().uuidString.lowercased(),
            title: "New message",
            body: "New message from Alex",
            collapseKey: "thread-7",
            badge: 4,
            data: ["kind": "message", "thread": "7", "google.sent_time": "x", "from": "y"],
            expiresAt: Date().addingTimeInterval(3600),
            priority: .high
        )
    }

    static func records(_ peer: Peer, kind: String) throws -> [[String: Any]] {
        try peer.records().filter { $0["kind"] as? String == kind }
    }

    @Test("a send is delivered: one verified token grant, then messages:send with the message FCM expects")
    func delivered() async throws {
        try await withPeer { keys, peer in
            let provider = try self.provider(keys, peer)
            let token = Self.registrationToken()
            let notification = Self.notification()
            #expect(await provider.send(notification, to: .fcm(registrationToken: token)) == .delivered)
            await provider.close()

            let grants = try Self.records(peer, kind: "token")
            try #require(grants.count == 1)
            #expect(grants[0]["accepted"] as? Bool == true)
            let claims = try #require(grants[0]["claims"] as? [String: Any])
            #expect(claims["iss"] as? String == Self.clientEmail)
            #expect(claims["scope"] as? String == "https://www.googleapis.com/auth/firebase.messaging")
            #expect((grants[0]["header"] as? [String: Any])?["kid"] as? String == "kindred-test-key-1")

            let sends = try Self.records(peer, kind: "send")
            try #require(sends.count == 1)
            #expect(sends[0]["accepted"] as? Bool == true)
            #expect(sends[0]["access_token"] as? String == grants[0]["access_token"] as? String)
            let message = try #require(sends[0]["message"] as? [String: Any])
            #expect(message["token"] as? String == token)
            #expect((message["notification"] as? [String: String]) == ["title": "New message", "body": "New message from Alex"])
            let data = try #require(message["data"] as? [String: String])
            #expect(data == ["kind": "message", "thread": "7", "notification_id": notification.id])
            let android = try #require(message["android"] as? [String: Any])
            #expect(android["priority"] as? String == "HIGH")
            #expect(android["collapse_key"] as? String == "thread-7")
            let ttl = try #require(android["ttl"] as? String)
            let seconds = try #require(Int(ttl.dropLast()))
            #expect(ttl.hasSuffix("s") && (3590...3600).contains(seconds))
            let androidNotification = try #require(android["notification"] as? [String: Any])
            #expect(androidNotification["tag"] as? String == "thread-7")
            #expect(androidNotification["notification_count"] as? Int == 4)
        }
    }

    static var answers: [(rule: [String: Any], outcome: PushOutcome)] {
        [
            (["status": 404, "error_code": "UNREGISTERED"], .targetGone),
            (["status": 400, "error_code": "INVALID_ARGUMENT"], .rejected(reason: "INVALID_ARGUMENT")),
            (["status": 429, "error_code": "QUOTA_EXCEEDED", "retry_after": 9], .retryLater(after: .seconds(9))),
            (["status": 503, "error_code": "UNAVAILABLE", "retry_after": 20], .retryLater(after: .seconds(20))),
            (["status": 500, "error_code": "INTERNAL"], .retryLater(after: nil)),
            (["status": 403, "error_code": "SENDER_ID_MISMATCH"], .rejected(reason: "SENDER_ID_MISMATCH")),
        ]
    }

    @Test("FCM answers become outcomes: UNREGISTERED gone, 429/503 later with Retry-After, INVALID_ARGUMENT rejected")
    func answersBecomeOutcomes() async throws {
        try await withPeer { keys, peer in
            let provider = try self.provider(keys, peer)
            var rules: [String: [String: Any]] = [:]
            var tokens: [String] = []
            for answer in Self.answers {
                let token = Self.registrationToken()
                tokens.append(token)
                rules[token] = answer.rule
            }
            try peer.setRules(rules)
            for (token, answer) in zip(tokens, Self.answers) {
                let outcome = await provider.send(Self.notification(), to: .fcm(registrationToken: token))
                #expect(outcome == answer.outcome, "rule \(answer.rule)")
            }
            await provider.close()
        }
    }

    @Test("an assertion signed with another key is refused by the token endpoint: sends wait, nothing is sent")
    func wrongKeyRefused() async throws {
        try await withPeer { keys, peer in
            let provider = try self.provider(keys, peer, account: keys.fcmOtherAccount)
            let outcome = await provider.send(Self.notification(), to: .fcm(registrationToken: Self.registrationToken()))
            await provider.close()
            #expect(outcome == .retryLater(after: .seconds(60)))
            let grants = try Self.records(peer, kind: "token")
            #expect(grants.count == 1)
            #expect(grants.first?["accepted"] as? Bool == false)
            #expect(grants.first?["reason"] as? String == "Invalid JWT Signature.")
            #expect(try Self.records(peer, kind: "send").isEmpty)
        }
    }

    @Test("one access token serves many sends, concurrent ones included; it is replaced shortly before it expires")
    func tokenCachedThenRefreshed() async throws {
        try await withPeer { keys, peer in
            // The clock starts 3500 s back: the first token (valid 3600 s) has 100 s left once the clock reaches
            // real time, inside the 5-minute margin.
            let clock = TestClock(Date().addingTimeInterval(-3500))
            let provider = try self.provider(keys, peer, clock: { clock.now })
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<30 {
                    group.addTask {
                        _ = await provider.send(Self.notification(), to: .fcm(registrationToken: Self.registrationToken()))
                    }
                }
            }
            #expect(try Self.records(peer, kind: "token").count == 1)
            clock.advance(by: 3000)  // 600 s left: kept
            #expect(await provider.send(Self.notification(), to: .fcm(registrationToken: Self.registrationToken())) == .delivered)
            #expect(try Self.records(peer, kind: "token").count == 1)
            clock.advance(by: 400)  // 200 s left: replaced
            #expect(await provider.send(Self.notification(), to: .fcm(registrationToken: Self.registrationToken())) == .delivered)
            await provider.close()

            let grants = try Self.records(peer, kind: "token")
            #expect(grants.count == 2)
            let sends = try Self.records(peer, kind: "send")
            #expect(sends.count == 32)
            #expect(sends.allSatisfy { $0["accepted"] as? Bool == true })
            #expect(sends.last?["access_token"] as? String == grants.last?["access_token"] as? String)
            #expect(sends.first?["access_token"] as? String != sends.last?["access_token"] as? String)
        }
    }

    @Test("a notification already expired is not sent; a non-FCM target is rejected")
    func notSent() async throws {
        try await withPeer { keys, peer in
            let provider = try self.provider(keys, peer)
            var expired = Self.notification()
            expired.expiresAt = Date().addingTimeInterval(-1)
            #expect(await provider.send(expired, to: .fcm(registrationToken: Self.registrationToken())) == .rejected(reason: "Expired before it was sent"))
            #expect(await provider.send(Self.notification(), to: .apns(deviceToken: "ab", topic: "t")) == .rejected(reason: "not an FCM target"))
            await provider.close()
            #expect(try peer.records().isEmpty)
        }
    }
}
