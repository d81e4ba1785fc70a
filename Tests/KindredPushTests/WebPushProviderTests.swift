import Foundation
import KindredGRPC
import KindredHTTP2
import KindredOpenSSL
import KindredPush
import KindredTestSupport
import Logging
import Testing

/// The Web Push provider against `Tests/Peers/webpush_peer.py`, an independent push service and browser (h2,
/// http_ece, cryptography): it hands out subscriptions as a browser does, checks VAPID (signature under the
/// application server key, aud, exp, sub) and decrypts every push with the subscription's private key.
@Suite("Web Push provider against the Web Push peer", .serialized)
struct WebPushProviderTests {
    static let subject = "mailto:push@kindred.test"

    struct Subscription {
        let id: String
        let target: PushTarget
    }

    func withPeer(_ body: (PeerKeys, Peer) async throws -> Void) async throws {
        let keys = try await PeerKeys.shared()
        let peer = try await Peer.start("webpush_peer.py", keys: keys, arguments: ["--vapid-public-key", keys.vapidPublicKey])
        defer { peer.stop() }
        try await body(keys, peer)
    }

    func provider(
        _ keys: PeerKeys, keyFile: String? = nil, clock: @escaping @Sendable () -> Date = { Date() }
    ) throws -> WebPushProvider {
        var configuration = WebPushConfiguration(vapidKeyFile: keyFile ?? keys.vapidKey, subject: Self.subject)
        configuration.trustRootsFile = keys.caFile
        return try WebPushProvider(configuration: configuration, logger: Logger(label: "kindred.push.test"), clock: clock)
    }

    /// A subscription made at the peer, as `pushManager.subscribe()` makes one in a browser.
    func subscribe(_ keys: PeerKeys, _ peer: Peer, host: String = "127.0.0.1") async throws -> Subscription {
        let client = HTTP2Client(
            configuration: try HTTPSOrigin("https://\(host):\(peer.port)").clientConfiguration(
                trustRootsFile: keys.caFile, connections: 1),
            logger: Logger(label: "kindred.push.test"))
        defer { Task { await client.close() } }
        let response = try await client.send(HTTP2Request(path: "/subscribe"), timeout: .seconds(10))
        try #require(response.status == 201)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: String])
        return Subscription(
            id: json["id"]!, target: .webPush(endpoint: json["endpoint"]!, p256dh: json["p256dh"]!, auth: json["auth"]!))
    }

    static func notification(collapseKey: String? = "thread:0b7c5e3e-9f6f-4f0e-8f1f-000000000042") -> PushNotification {
        PushNotification(
            id: UUID().uuidString.lowercased(), title: "New match", body: "You and Alex liked each other",
            collapseKey: collapseKey, badge: 3, data: ["kind": "new_match", "thread": "t-42"],
            expiresAt: Date().addingTimeInterval(3600), priority: .high)
    }

    @Test("a push is delivered: VAPID verified, headers as RFC 8030 says, and the browser decrypts exactly our payload")
    func delivered() async throws {
        try await withPeer { keys, peer in
            let provider = try self.provider(keys)
            let subscription = try await self.subscribe(keys, peer)
            let notification = Self.notification()
            #expect(await provider.send(notification, to: subscription.target) == .delivered)
            await provider.close()

            let records = try peer.records()
            try #require(records.count == 1)
            let record = records[0]
            #expect(record["accepted"] as? Bool == true)
            #expect(record["subscription"] as? String == subscription.id)
            let payload = try #require(record["payload"] as? [String: Any])
            #expect(payload["id"] as? String == notification.id)
            #expect(payload["title"] as? String == "New match")
            #expect(payload["body"] as? String == "You and Alex liked each other")
            #expect(payload["tag"] as? String == notification.collapseKey)
            #expect(payload["badge"] as? Int == 3)
            #expect(payload["data"] as? [String: String] == ["kind": "new_match", "thread": "t-42"])
            let headers = try #require(record["headers"] as? [String: String])
            #expect(headers["content-encoding"] == "aes128gcm")
            #expect(headers["urgency"] == "high")
            let ttl = try #require(Int(headers["ttl"] ?? ""))
            #expect((3590...3600).contains(ttl))
            #expect(headers["topic"]?.count == 32)
            // Padded to a multiple of 128 bytes: the push service cannot tell texts apart by length.
            #expect(((record["body_length"] as? Int ?? 0) - 86 - 1 - 16) % 128 == 0)
            let vapid = try #require(record["vapid"] as? [String: Any])
            #expect(vapid["aud"] as? String == "https://127.0.0.1:\(peer.port)")
            #expect(vapid["sub"] as? String == Self.subject)
            let expires = try #require(vapid["exp"] as? Int)
            #expect(Double(expires) - Date().timeIntervalSince1970 > 11 * 3600)
        }
    }

    @Test("one VAPID token per push service origin, reused; a new one near its expiry")
    func tokenCachedPerOrigin() async throws {
        try await withPeer { keys, peer in
            let clock = TestClock(Date())
            let provider = try self.provider(keys, clock: { clock.now })
            let byAddress = try await self.subscribe(keys, peer)
            let byName = try await self.subscribe(keys, peer, host: "localhost")
            for _ in 0..<3 {
                #expect(await provider.send(Self.notification(), to: byAddress.target) == .delivered)
                #expect(await provider.send(Self.notification(), to: byName.target) == .delivered)
            }
            clock.advance(by: 11.5 * 3600)  // within the hour before expiry: signed anew
            var later = Self.notification()
            later.expiresAt = nil  // the notification's own expiry is on real time
            #expect(await provider.send(later, to: byAddress.target) == .delivered)
            await provider.close()
            let audiences = try peer.records().compactMap { ($0["vapid"] as? [String: Any])?["aud"] as? String }
            #expect(audiences.filter { $0 == "https://localhost:\(peer.port)" }.count == 3)
            let expiries = try peer.records().filter { ($0["vapid"] as? [String: Any])?["aud"] as? String == "https://127.0.0.1:\(peer.port)" }
                .compactMap { ($0["vapid"] as? [String: Any])?["exp"] as? Int }
            try #require(expiries.count == 4)
            #expect(Set(expiries[0..<3]).count == 1)
            #expect(expiries[3] > expiries[0])
        }
    }

    /// What the peer is told to answer, and the outcome the provider must make of it.
    static var answers: [(rule: [String: Any], outcome: PushOutcome)] {
        [
            (["status": 410], .targetGone),
            (["status": 404], .targetGone),
            (["status": 429, "retry_after": 7], .retryLater(after: .seconds(7))),
            (["status": 503, "retry_after": 30], .retryLater(after: .seconds(30))),
            (["status": 500], .retryLater(after: nil)),
            (["status": 413], .rejected(reason: "Payload too large")),
            (["status": 400], .rejected(reason: "HTTP 400")),
        ]
    }

    @Test("push service answers become outcomes: 404/410 gone, 429 and 5xx later (Retry-After), 413 and other 4xx rejected")
    func answersBecomeOutcomes() async throws {
        try await withPeer { keys, peer in
            let provider = try self.provider(keys)
            var rules: [String: [String: Any]] = [:]
            var subscriptions: [Subscription] = []
            for answer in Self.answers {
                let subscription = try await self.subscribe(keys, peer)
                subscriptions.append(subscription)
                rules[subscription.id] = answer.rule
            }
            try peer.setRules(rules)
            for (subscription, answer) in zip(subscriptions, Self.answers) {
                #expect(await provider.send(Self.notification(), to: subscription.target) == answer.outcome, "rule \(answer.rule)")
            }
            await provider.close()
            // Every push was decrypted before the rule answered: the outcome is not a decryption failure.
            #expect(try peer.records().allSatisfy { $0["payload"] != nil })
        }
    }

    @Test("the peer really checks: a token signed with another key, or an expired one, is refused with 403")
    func vapidRefused() async throws {
        try await withPeer { keys, peer in
            let subscription = try await self.subscribe(keys, peer)
            let wrongKey = try self.provider(keys, keyFile: keys.vapidOtherKey)
            #expect(await wrongKey.send(Self.notification(), to: subscription.target) == .rejected(reason: "VAPID refused (HTTP 403)"))
            await wrongKey.close()
            // A clock 25 hours behind signs a token that expired an hour ago.
            let late = try self.provider(keys, clock: { Date().addingTimeInterval(-25 * 3600) })
            var notification = Self.notification()
            notification.expiresAt = nil
            #expect(await late.send(notification, to: subscription.target) == .rejected(reason: "VAPID refused (HTTP 403)"))
            await late.close()
            let reasons = try peer.records().map { $0["reason"] as? String ?? "ok" }
            #expect(reasons == ["k is not the subscription's application server key", "expired"])
        }
    }

    @Test("a subscription the push service does not know is gone; unusable keys are gone without a request")
    func goneSubscriptions() async throws {
        try await withPeer { keys, peer in
            let provider = try self.provider(keys)
            let known = try await self.subscribe(keys, peer)
            guard case .webPush(_, let p256dh, let auth) = known.target else { return }
            let unknown = PushTarget.webPush(endpoint: "https://127.0.0.1:\(peer.port)/push/0123abcd", p256dh: p256dh, auth: auth)
            #expect(await provider.send(Self.notification(), to: unknown) == .targetGone)
            let badKey = PushTarget.webPush(endpoint: "https://127.0.0.1:\(peer.port)/push/0123abcd", p256dh: "AAAA", auth: auth)
            #expect(await provider.send(Self.notification(), to: badKey) == .targetGone)
            #expect(await provider.send(Self.notification(), to: .fcm(registrationToken: "x")) == .rejected(reason: "not a Web Push target"))
            #expect(await provider.send(Self.notification(), to: .webPush(endpoint: "http://127.0.0.1/x", p256dh: p256dh, auth: auth))
                == .rejected(reason: "Endpoint is not an https URL"))
            await provider.close()
            #expect(try peer.records().count == 1)
        }
    }

    @Test("a push service that is not there: retry later")
    func unreachable() async throws {
        let keys = try await PeerKeys.shared()
        var configuration = WebPushConfiguration(vapidKeyFile: keys.vapidKey, subject: Self.subject)
        configuration.trustRootsFile = keys.caFile
        configuration.requestTimeout = .seconds(3)
        let provider = try WebPushProvider(configuration: configuration, logger: Logger(label: "kindred.push.test"))
        let receiver = try P256KeyAgreementKey()
        let target = PushTarget.webPush(
            endpoint: "https://127.0.0.1:\(try unusedPort())/push/abc", p256dh: Base64URL.encode(try receiver.publicKeyBytes()),
            auth: Base64URL.encode(try SecureRandom.bytes(count: 16)))
        #expect(await provider.send(Self.notification(), to: target) == .retryLater(after: nil))
        await provider.close()
    }

    @Test("a subject that is not mailto: or https: is a configuration error")
    func badSubject() async throws {
        let keys = try await PeerKeys.shared()
        #expect(throws: PushConfigurationError.self) {
            try WebPushProvider(
                configuration: WebPushConfiguration(vapidKeyFile: keys.vapidKey, subject: "ops@kindred.test"),
                logger: Logger(label: "kindred.push.test"))
        }
    }
}
