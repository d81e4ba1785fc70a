import CoreMetrics
import Foundation
import KindredIdentity
import KindredPostgres
import KindredPush
import KindredServiceKit
import KindredTestSupport
import Logging
import Testing

@testable import KindredNotify

/// Notify's sender on a real queue (PostgreSQL) pushing through the real APNs provider to `Tests/Peers/apns_peer.py`,
/// the independent HTTP/2 TLS peer that verifies each provider token and records every push it received with its
/// `apns-id` and how many streams its connection had open then.
@Suite("Notification sender against the APNs peer", .serialized)
struct SenderTests {
    static let keyID = "KEY1234567"
    static let teamID = "TEAM123456"
    static let topic = "com.kindred.test"

    /// A notify server's database (its sender stays off: no provider is configured) and a running peer.
    func withPeer(_ body: (NotifyHarness, PeerKeys, Peer) async throws -> Void) async throws {
        let keys = try await PeerKeys.shared()
        let peer = try await Peer.start(
            "apns_peer.py", keys: keys,
            arguments: ["--public-key", keys.apnsPublicKey, "--key-id", Self.keyID, "--team-id", Self.teamID,
                        "--topic", Self.topic])
        defer { peer.stop() }
        try await NotifyHarness.with { harness in try await body(harness, keys, peer) }
    }

    /// `count` senders, each with its own APNs provider (one connection); once one waits for work, `whenIdle`; then
    /// run until `done` holds (polled; 90 s at most).
    func runSenders(
        _ count: Int = 1, concurrency: Int, poll: Duration = .milliseconds(50), wakeup: SendWakeup = SendWakeup(),
        harness: NotifyHarness, keys: PeerKeys, peer: Peer, whenIdle: () async throws -> Void = {},
        until done: () async throws -> Bool
    ) async throws {
        var logger = Logger(label: "kindred.notify.test")
        logger.logLevel = .error
        var providers: [APNsProvider] = []
        var runs: [Task<Void, Never>] = []
        var senders: [NotificationSender] = []
        for _ in 0..<count {
            var configuration = APNsConfiguration(
                keyFile: keys.apnsKey, keyID: Self.keyID, teamID: Self.teamID, topic: Self.topic)
            configuration.baseURL = "https://127.0.0.1:\(peer.port)"
            configuration.trustRootsFile = keys.caFile
            let provider = try APNsProvider(configuration: configuration, logger: logger)
            providers.append(provider)
            let sender = NotificationSender(
                database: harness.database, providers: [.apns: provider], apnsTopic: Self.topic,
                pollInterval: poll, lease: .seconds(60), concurrency: concurrency, wakeup: wakeup,
                metrics: NOOPMetricsHandler.instance, logger: logger)
            senders.append(sender)
            runs.append(Task { await sender.run() })
        }
        let idle = ContinuousClock.now + .seconds(60)
        while !senders.allSatisfy(\.isWaiting), ContinuousClock.now < idle { try await Task.sleep(for: .milliseconds(10)) }
        try await whenIdle()
        let deadline = ContinuousClock.now + .seconds(90)
        var finished = false
        while ContinuousClock.now < deadline {
            if try await done() {
                finished = true
                break
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        for run in runs { run.cancel() }
        for run in runs { await run.value }
        for provider in providers { await provider.close() }
        #expect(finished, "the senders did not finish in 90 s")
    }

    static func deviceToken() -> String {
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    /// `count` members with one APNs device each and a queued match notification each; returns the notification ids
    /// by device token.
    static func queueMatches(_ count: Int, _ harness: NotifyHarness, tokens: [String]? = nil) async throws
        -> [String: String]
    {
        var ids: [String: String] = [:]
        for index in 0..<count {
            let member = try NotifyHarness.member()
            let token = tokens?[index] ?? Self.deviceToken()
            _ = try await harness.register(member.token, platform: .apns, device: token)
            let id = try UUIDv7.generate()
            try await NotificationStore().enqueue(
                id: id, to: member.id, kind: .newMatch, about: try UUIDv7.generate(), source: try UUIDv7.generate(),
                collapseKey: nil, in: harness.database)
            ids[token] = id
        }
        return ids
    }

    static func pending(_ harness: NotifyHarness) async throws -> Int64 {
        try await harness.database.query("SELECT count(*) FROM notifications WHERE state = 'pending'").scalar(Int64.self)
    }

    static func accepted(_ peer: Peer) throws -> [(device: String, id: String, open: Int)] {
        try peer.records().filter { $0["accepted"] as? Bool == true }.map { record in
            (record["device"] as? String ?? "", (record["headers"] as? [String: Any])?["apns-id"] as? String ?? "",
             record["open_streams"] as? Int ?? 0)
        }
    }

    @Test("a claimed batch is pushed concurrently, never more than KINDRED_NOTIFY_SEND_CONCURRENCY at once")
    func pushesInFlightAreBounded() async throws {
        try await withPeer { harness, keys, peer in
            // Each answer waits 300 ms: one push at a time would show one open stream at the peer.
            try peer.setRules(["*": ["status": 200, "delay_ms": 300]])
            let ids = try await Self.queueMatches(40, harness)
            try await self.runSenders(concurrency: 8, harness: harness, keys: keys, peer: peer) {
                try await Self.pending(harness) == 0
            }
            let pushes = try Self.accepted(peer)
            #expect(pushes.count == 40)
            #expect(Dictionary(pushes.map { ($0.device, $0.id) }) { first, _ in first } == ids)
            let mostOpen = pushes.map(\.open).max() ?? 0
            #expect(mostOpen > 1, "one push at a time")
            #expect(mostOpen <= 8, "\(mostOpen) pushes in flight, over the bound of 8")
            let sent = try await harness.database.query(
                "SELECT count(*) FROM notifications WHERE state = 'sent'").scalar(Int64.self)
            #expect(sent == 40)
        }
    }

    @Test("two senders on one queue push each notification once")
    func twoSendersShareTheQueue() async throws {
        try await withPeer { harness, keys, peer in
            try peer.setRules(["*": ["status": 200, "delay_ms": 50]])
            let ids = try await Self.queueMatches(60, harness)
            try await self.runSenders(2, concurrency: 8, harness: harness, keys: keys, peer: peer) {
                try await Self.pending(harness) == 0
            }
            let pushes = try Self.accepted(peer)
            #expect(pushes.count == 60, "\(pushes.count) pushes for 60 notifications")
            #expect(Set(pushes.map(\.id)) == Set(ids.values))
        }
    }

    @Test("a retried notification skips the device it reached, and an unregistered token is removed")
    func retryAndGoneDevices() async throws {
        try await withPeer { harness, keys, peer in
            let (reached, busy, gone) = (Self.deviceToken(), Self.deviceToken(), Self.deviceToken())
            // One member with two devices: the first takes the push, the second asks once to retry in 1 s. Another
            // member's only device is gone.
            try peer.setRules([
                busy: ["status": 429, "reason": "TooManyRequests", "retry_after": 1, "times": 1],
                gone: ["status": 410, "reason": "Unregistered"],
            ])
            let member = try NotifyHarness.member()
            // Registered last, the reached device is pushed first (a 429 pauses the provider for the devices after it).
            _ = try await harness.register(member.token, platform: .apns, device: busy)
            _ = try await harness.register(member.token, platform: .apns, device: reached)
            let id = try UUIDv7.generate()
            try await NotificationStore().enqueue(
                id: id, to: member.id, kind: .newMatch, about: try UUIDv7.generate(), source: try UUIDv7.generate(),
                collapseKey: nil, in: harness.database)
            let goneID = try await Self.queueMatches(1, harness, tokens: [gone])[gone]
            try await self.runSenders(concurrency: 8, harness: harness, keys: keys, peer: peer) {
                try await Self.pending(harness) == 0
            }
            let pushes = try Self.accepted(peer)
            #expect(pushes.filter { $0.device == reached }.map(\.id) == [id], "the reached device got it once")
            #expect(pushes.filter { $0.device == busy }.map(\.id) == [id], "the busy device got it on the retry")
            let states = try await harness.database.query(
                "SELECT notification_id::text, state, attempts FROM notifications ORDER BY notification_id")
                .map { try $0.decode((String, String, Int32).self) }
            #expect(states.first { $0.0 == id }.map { [$0.1, "\($0.2)"] } == ["sent", "1"])
            #expect(states.first { $0.0 == goneID }?.1 == "skipped")
            let devices = try await harness.database.query(
                "SELECT token FROM devices ORDER BY token").map { try $0.decode(String.self, at: 0) }
            #expect(devices == [reached, busy].sorted(), "the unregistered token is removed, the others stay")
        }
    }

    @Test("events applied by the service wake an idle sender: a match is pushed long before the poll")
    func appliedEventsWakeTheSender() async throws {
        try await withPeer { harness, keys, peer in
            let (ann, bob) = (try NotifyHarness.member(), try NotifyHarness.member())
            let (annDevice, bobDevice) = (Self.deviceToken(), Self.deviceToken())
            _ = try await harness.register(ann.token, platform: .apns, device: annDevice)
            _ = try await harness.register(bob.token, platform: .apns, device: bobDevice)
            let started = ContinuousClock.now
            // The sender's poll is a minute and it is idle when the event comes: pushes within 50 s of the start
            // can only follow the service's wake-up.
            try await self.runSenders(
                concurrency: 8, poll: .seconds(60), wakeup: harness.server.server.service.sendWakeup, harness: harness,
                keys: keys, peer: peer,
                whenIdle: {
                    let event = try QueueTests.matchCreated(ann.id, bob.id, match: try UUIDv7.generate())
                    _ = try await harness.client.deliver(N.deliverEvents, [event], from: "match", tokens: testKeys)
                }
            ) { Set(try Self.accepted(peer).map(\.device)) == [annDevice, bobDevice] }
            #expect(ContinuousClock.now - started < .seconds(50), "the pushes waited for the poll")
        }
    }
}
