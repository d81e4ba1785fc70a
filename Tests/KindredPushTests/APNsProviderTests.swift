import Foundation
import KindredPush
import KindredTestSupport
import Logging
import Testing

/// The APNs provider against `Tests/Peers/apns_peer.py`, an independent HTTP/2 TLS server (h2 + cryptography) that
/// verifies every provider token against the .p8 key's public key and checks headers and payload as Apple does.
@Suite("APNs provider against the APNs peer", .serialized)
struct APNsProviderTests {
    static let keyID = "KEY1234567"
    static let teamID = "TEAM123456"
    static let topic = "com.kindred.test"

    /// Runs `body` with fresh keys and a running peer; stops both afterwards.
    /// `arguments`: the peer's own beyond its keys and topic (`--processes N`).
    func withPeer(arguments: [String] = [], _ body: (PeerKeys, Peer) async throws -> Void) async throws {
        let keys = try await PeerKeys.shared()
        let peer = try await Peer.start(
            "apns_peer.py",
            keys: keys,
            arguments: ["--public-key", keys.apnsPublicKey, "--key-id", Self.keyID, "--team-id", Self.teamID,
                        "--topic", Self.topic] + arguments
        )
        defer { peer.stop() }
        try await body(keys, peer)
    }

    func provider(
        _ keys: PeerKeys,
        _ peer: Peer,
        keyFile: String? = nil,
        connections: Int = 1,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) throws -> APNsProvider {
        var configuration = APNsConfiguration(
            keyFile: keyFile ?? keys.apnsKey,
            keyID: Self.keyID,
            teamID: Self.teamID,
            topic: Self.topic
        )
        configuration.baseURL = "https://127.0.0.1:\(peer.port)"
        configuration.trustRootsFile = keys.caFile
        configuration.connectionCount = connections
        return try APNsProvider(configuration: configuration, logger: Logger(label: "kindred.push.test"), clock: clock)
    }

    static func deviceToken() -> String {
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    static func notification(id: String = UUID().uuidString.lowercased()) -> PushNotification {
        PushNotification(
            id: id,
            title: "New match",
            body: "You and Alex liked each other",
            collapseKey: "match-42",
            badge: 3,
            data: ["kind": "match", "thread": "t-42"],
            expiresAt: Date().addingTimeInterval(3600),
            priority: .high
        )
    }

    @Test("a push is delivered with Apple's headers, a verified provider token and the alert payload")
    func delivered() async throws {
        try await withPeer { keys, peer in
            let provider = try self.provider(keys, peer)
            let device = Self.deviceToken()
            let notification = Self.notification()
            let outcome = await provider.send(notification, to: .apns(deviceToken: device, topic: Self.topic))
            await provider.close()
            #expect(outcome == .delivered)

            let records = try peer.records()
            try #require(records.count == 1)
            let record = records[0]
            #expect(record["accepted"] as? Bool == true)
            #expect(record["device"] as? String == device)
            let headers = try #require(record["headers"] as? [String: String])
            #expect(headers["apns-push-type"] == "alert")
            #expect(headers["apns-topic"] == Self.topic)
            #expect(headers["apns-priority"] == "10")
            #expect(headers["apns-id"] == notification.id)
            #expect(headers["apns-collapse-id"] == "match-42")
            #expect(headers["apns-expiration"] == String(Int(notification.expiresAt!.timeIntervalSince1970)))
            let jwt = try #require(record["jwt"] as? [String: Any])
            #expect((jwt["header"] as? [String: Any])?["kid"] as? String == Self.keyID)
            #expect((jwt["claims"] as? [String: Any])?["iss"] as? String == Self.teamID)
            let payload = try #require(record["payload"] as? [String: Any])
            let aps = try #require(payload["aps"] as? [String: Any])
            let alert = try #require(aps["alert"] as? [String: Any])
            #expect(alert["title"] as? String == "New match")
            #expect(alert["body"] as? String == "You and Alex liked each other")
            #expect(aps["badge"] as? Int == 3)
            #expect(aps["thread-id"] as? String == "match-42")
            #expect(payload["kind"] as? String == "match")
            #expect(payload["thread"] as? String == "t-42")
        }
    }

    @Test("a normal-priority push without collapse id or expiry is sent with priority 5 and neither header")
    func normalPriority() async throws {
        try await withPeer { keys, peer in
            let provider = try self.provider(keys, peer)
            let notification = PushNotification(id: UUID().uuidString, title: "3 people liked you", body: "", priority: .normal)
            let outcome = await provider.send(notification, to: .apns(deviceToken: Self.deviceToken(), topic: ""))
            await provider.close()
            #expect(outcome == .delivered)
            let headers = try #require(try peer.records().first?["headers"] as? [String: String])
            #expect(headers["apns-priority"] == "5")
            #expect(headers["apns-topic"] == Self.topic)  // the configured default
            #expect(headers["apns-collapse-id"] == nil)
            #expect(headers["apns-expiration"] == nil)
        }
    }

    /// What the peer is told to answer, and the outcome the provider must make of it.
    static var answers: [(rule: [String: Any], outcome: PushOutcome)] {
        [
        (["status": 410, "reason": "Unregistered"], .targetGone),
        (["status": 400, "reason": "BadDeviceToken"], .targetGone),
        (["status": 429, "reason": "TooManyRequests", "retry_after": 7], .retryLater(after: .seconds(7))),
        (["status": 500, "reason": "InternalServerError"], .retryLater(after: nil)),
        (["status": 503, "reason": "ServiceUnavailable", "retry_after": 30], .retryLater(after: .seconds(30))),
        (["status": 400, "reason": "DeviceTokenNotForTopic"], .rejected(reason: "DeviceTokenNotForTopic")),
        (["status": 413, "reason": "PayloadTooLarge"], .rejected(reason: "PayloadTooLarge")),
        ]
    }

    @Test("APNs answers become outcomes: 410 and BadDeviceToken gone, 429 and 5xx later (Retry-After), other 4xx rejected")
    func answersBecomeOutcomes() async throws {
        try await withPeer { keys, peer in
            let provider = try self.provider(keys, peer)
            var rules: [String: [String: Any]] = [:]
            var devices: [String] = []
            for answer in Self.answers {
                let device = Self.deviceToken()
                devices.append(device)
                rules[device] = answer.rule
            }
            try peer.setRules(rules)
            for (device, answer) in zip(devices, Self.answers) {
                let outcome = await provider.send(Self.notification(), to: .apns(deviceToken: device, topic: Self.topic))
                #expect(outcome == answer.outcome, "rule \(answer.rule)")
            }
            await provider.close()
        }
    }

    @Test("a token signed with another key is refused by the peer: it really verifies")
    func wrongKeyRefused() async throws {
        try await withPeer { keys, peer in
            let provider = try self.provider(keys, peer, keyFile: keys.apnsOtherKey)
            let outcome = await provider.send(Self.notification(), to: .apns(deviceToken: Self.deviceToken(), topic: Self.topic))
            await provider.close()
            #expect(outcome == .rejected(reason: "InvalidProviderToken"))
            let record = try #require(try peer.records().first)
            #expect(record["accepted"] as? Bool == false)
            #expect(record["status"] as? Int == 403)
        }
    }

    @Test("a topic the key may not push to is refused by the peer")
    func wrongTopicRefused() async throws {
        try await withPeer { keys, peer in
            let provider = try self.provider(keys, peer)
            let outcome = await provider.send(Self.notification(), to: .apns(deviceToken: Self.deviceToken(), topic: "com.other.app"))
            await provider.close()
            #expect(outcome == .rejected(reason: "TopicDisallowed"))
        }
    }

    @Test("one provider token serves many pushes; it is signed anew once older than the refresh interval")
    func tokenReusedThenRefreshed() async throws {
        try await withPeer { keys, peer in
            // 45 minutes ago: the first token is still younger than Apple's hour when it arrives.
            let clock = TestClock(Date().addingTimeInterval(-45 * 60))
            let provider = try self.provider(keys, peer, clock: { clock.now })
            for _ in 0..<10 {
                #expect(await provider.send(Self.notification(), to: .apns(deviceToken: Self.deviceToken(), topic: Self.topic)) == .delivered)
            }
            clock.advance(by: 30 * 60)  // 30 minutes old: reused
            for _ in 0..<10 {
                #expect(await provider.send(Self.notification(), to: .apns(deviceToken: Self.deviceToken(), topic: Self.topic)) == .delivered)
            }
            clock.advance(by: 15 * 60)  // 45 minutes old, past the 40-minute refresh: a new one
            for _ in 0..<10 {
                #expect(await provider.send(Self.notification(), to: .apns(deviceToken: Self.deviceToken(), topic: Self.topic)) == .delivered)
            }
            await provider.close()

            let tokens = try peer.records().compactMap { ($0["jwt"] as? [String: Any])?["token"] as? String }
            #expect(tokens.count == 30)
            #expect(Set(tokens[0..<20]).count == 1)
            #expect(Set(tokens[20..<30]).count == 1)
            #expect(tokens[0] != tokens[29])
        }
    }

    @Test("a token older than an hour is refused as expired; the provider signs a new one and the retry is delivered")
    func expiredTokenRefreshed() async throws {
        try await withPeer { keys, peer in
            // The clock is an hour and a half behind: the peer (on real time) sees an expired token.
            let clock = TestClock(Date().addingTimeInterval(-90 * 60))
            let provider = try self.provider(keys, peer, clock: { clock.now })
            let device = Self.deviceToken()
            #expect(await provider.send(Self.notification(), to: .apns(deviceToken: device, topic: Self.topic)) == .retryLater(after: nil))
            clock.advance(by: 90 * 60)
            #expect(await provider.send(Self.notification(), to: .apns(deviceToken: device, topic: Self.topic)) == .delivered)
            await provider.close()
            let reasons = try peer.records().map { $0["reason"] as? String ?? "ok" }
            #expect(reasons == ["ExpiredProviderToken", "ok"])
        }
    }

    @Test("many concurrent pushes are multiplexed as streams of one connection")
    func concurrentPushesShareOneConnection() async throws {
        try await withPeer { keys, peer in
            // Every answer waits 300 ms, so pushes overlap at the peer unless they were sent one at a time.
            try peer.setRules(["*": ["status": 200, "delay_ms": 300]])
            let provider = try self.provider(keys, peer, connections: 1)
            let outcomes = await withTaskGroup(of: PushOutcome.self) { group in
                for _ in 0..<200 {
                    group.addTask {
                        await provider.send(Self.notification(), to: .apns(deviceToken: Self.deviceToken(), topic: Self.topic))
                    }
                }
                return await group.reduce(into: [PushOutcome]()) { $0.append($1) }
            }
            await provider.close()
            #expect(outcomes.count == 200)
            #expect(outcomes.allSatisfy { $0 == .delivered })
            let records = try peer.records()
            #expect(records.count == 200)
            #expect(Set(records.compactMap { $0["connection"] as? Int }).count == 1)
            let mostOpen = records.compactMap { $0["open_streams"] as? Int }.max() ?? 0
            #expect(mostOpen > 50, "at most \(mostOpen) streams were open at once")
        }
    }

    @Test("several connections share the pushes, round-robin once they are open")
    func severalConnections() async throws {
        try await withPeer { keys, peer in
            try peer.setRules(["*": ["status": 200, "delay_ms": 200]])
            let provider = try self.provider(keys, peer, connections: 3)
            // The first burst opens the connections (a connection opens while calls find no free stream); the
            // second spreads over all of them.
            await Self.sendInBursts(provider, bursts: 2, of: 150)
            await provider.close()
            let records = try peer.records()
            #expect(records.count == 300)
            #expect(records.allSatisfy { $0["accepted"] as? Bool == true })
            #expect(Set(records.compactMap { $0["connection"] as? Int }).count == 3)
            #expect(Set(records[150...].compactMap { $0["connection"] as? Int }).count == 3)
        }
    }

    @Test("a peer with several processes checks every push, records each once, and ends with its first process")
    func peerWithSeveralProcesses() async throws {
        try await withPeer(arguments: ["--processes", "3"]) { keys, peer in
            let others = Self.children(of: peer.processIdentifier)
            #expect(others.count == 2)
            try peer.setRules(["*": ["status": 200, "delay_ms": 200]])
            let provider = try self.provider(keys, peer, connections: 6)
            await Self.sendInBursts(provider, bursts: 2, of: 150)
            await provider.close()
            let records = try peer.records()
            #expect(records.count == 300)
            #expect(records.allSatisfy { $0["accepted"] as? Bool == true })
            let ids = records.compactMap { ($0["headers"] as? [String: Any])?["apns-id"] as? String }
            #expect(Set(ids).count == 300)
            // Connection ids say which process took the connection: 1,000,000 × its index.
            let processes = Set(records.compactMap { ($0["connection"] as? Int).map { $0 / 1_000_000 } })
            #expect(!processes.isEmpty && processes.isSubset(of: [0, 1, 2]))
            peer.stop()
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline, others.contains(where: Self.running) {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(!others.contains(where: Self.running), "a peer process outlived the first")
        }
    }

    /// `bursts` rounds of `count` pushes at once, each round after the last has answered.
    static func sendInBursts(_ provider: APNsProvider, bursts: Int, of count: Int) async {
        for _ in 0..<bursts {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<count {
                    group.addTask {
                        _ = await provider.send(
                            Self.notification(), to: .apns(deviceToken: Self.deviceToken(), topic: Self.topic))
                    }
                }
            }
        }
    }

    static func children(of pid: Int32) -> [Int32] {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? ""
        return text.split(separator: " ").compactMap { Int32($0) }
    }

    /// Whether a process exists and has not exited (a zombie whose parent has not reaped it has).
    static func running(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
        return stat.split(separator: ")").last?.split(separator: " ").first != "Z"
    }

    @Test("a peer that is not there: retry later")
    func unreachable() async throws {
        let keys = try await PeerKeys.shared()
        var configuration = APNsConfiguration(keyFile: keys.apnsKey, keyID: Self.keyID, teamID: Self.teamID, topic: Self.topic)
        configuration.baseURL = "https://127.0.0.1:\(try unusedPort())"
        configuration.trustRootsFile = keys.caFile
        configuration.requestTimeout = .seconds(3)
        let provider = try APNsProvider(configuration: configuration, logger: Logger(label: "kindred.push.test"))
        let outcome = await provider.send(Self.notification(), to: .apns(deviceToken: Self.deviceToken(), topic: Self.topic))
        await provider.close()
        #expect(outcome == .retryLater(after: nil))
    }

    @Test("a device token that is not hex is gone without a request; a non-APNs target is rejected")
    func badTargets() async throws {
        let keys = try await PeerKeys.shared()
        var configuration = APNsConfiguration(keyFile: keys.apnsKey, keyID: Self.keyID, teamID: Self.teamID, topic: Self.topic)
        configuration.baseURL = "https://127.0.0.1:\(try unusedPort())"
        let provider = try APNsProvider(configuration: configuration, logger: Logger(label: "kindred.push.test"))
        #expect(await provider.send(Self.notification(), to: .apns(deviceToken: "../../x", topic: Self.topic)) == .targetGone)
        #expect(await provider.send(Self.notification(), to: .fcm(registrationToken: "abc")) == .rejected(reason: "not an APNs target"))
        await provider.close()
    }
}
