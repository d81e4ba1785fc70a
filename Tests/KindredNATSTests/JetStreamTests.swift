import Foundation
import KindredTestSupport
import Logging
import Testing

@testable import KindredNATS

/// The client and the JetStream calls against a real `nats-server -js` (one node; the cluster cases start three).
@Suite(.serialized) struct JetStreamTests {
    private static let logger = Logger(label: "nats-test")

    private func withServer(
        nodes: Int = 1, _ body: (NATSTestCluster, NATSClient, JetStream) async throws -> Void
    ) async throws {
        let cluster = try await NATSTestCluster.start(nodes: nodes)
        defer { cluster.stop() }
        let client = NATSClient(servers: NATSServerAddress.parseList(cluster.url)!, logger: Self.logger)
        try await client.connect()
        do {
            try await body(cluster, client, JetStream(client: client))
        } catch {
            await client.close()
            throw error
        }
        await client.close()
    }

    /// Polls `condition` until it holds (at most 30 s).
    private func eventually(_ what: String, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if (try? await condition()) == true { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("never: \(what)")
    }

    @Test func publishSubscribeAndRequest() async throws {
        try await self.withServer { _, client, _ in
            let subscription = try await client.subscribe(to: "echo.*")
            let responder = Task {
                for await message in subscription.messages {
                    guard let reply = message.replyTo else { continue }
                    var headers = NATSHeaders()
                    headers.add("Echoed-Subject", message.subject)
                    try await client.publish(reply, payload: message.payload.reversed(), headers: headers)
                }
            }
            defer { responder.cancel() }
            try await self.eventually("the echo answers") {
                let answer = try await client.request("echo.a", payload: Array("abc".utf8), timeout: .seconds(1))
                return answer.payload == Array("cba".utf8) && answer.headers?["echoed-subject"] == "echo.a"
            }
            await #expect(throws: NATSProtocolError.self) {
                _ = try await client.request("nobody.listens", payload: [], timeout: .seconds(5))
            }
            await #expect(throws: NATSProtocolError.self) {
                try await client.publish("bad subject", payload: [])
            }
            await client.unsubscribe(subscription)
        }
    }

    /// `firstSequence` finds the first message at or after a sequence on a subject filter with wildcards; nil when
    /// there is none; a stream that does not exist throws.
    @Test func firstSequenceOnASubjectFilter() async throws {
        try await self.withServer { _, _, jetStream in
            var stream = JetStreamStreamConfiguration(name: "PARTS", subjects: ["parts.>"])
            stream.storage = "memory"
            try await jetStream.createOrUpdateStream(stream)
            var sequences: [UInt64] = []
            for (index, subject) in ["parts.1.a", "parts.2.a", "parts.1.b", "parts.2.b"].enumerated() {
                sequences.append(
                    try await jetStream.publish(subject, payload: [], messageID: "m\(index)").sequence)
            }
            #expect(try await jetStream.firstSequence(stream: "PARTS", from: 1, subject: "parts.2.>") == sequences[1])
            #expect(
                try await jetStream.firstSequence(stream: "PARTS", from: sequences[1] + 1, subject: "parts.2.>")
                    == sequences[3])
            let afterLast = sequences[3] + 1
            #expect(try await jetStream.firstSequence(stream: "PARTS", from: afterLast, subject: "parts.2.>") == nil)
            #expect(try await jetStream.firstSequence(stream: "PARTS", from: 1, subject: "parts.3.>") == nil)
            await #expect(throws: JetStreamAPIError.self) {
                _ = try await jetStream.firstSequence(stream: "NONE", from: 1, subject: "parts.>")
            }
        }
    }

    @Test func streamPublishDeduplicatesByMessageID() async throws {
        try await self.withServer { _, _, jetStream in
            var stream = JetStreamStreamConfiguration(name: "EVENTS", subjects: ["events.>"])
            stream.storage = "memory"
            try await jetStream.createOrUpdateStream(stream)
            try await jetStream.createOrUpdateStream(stream)  // the same again: fine
            stream.maxAge = 3_600_000_000_000
            #expect(try await jetStream.createOrUpdateStream(stream).config.maxAge == 3_600_000_000_000)  // updated

            let first = try await jetStream.publish("events.a", payload: Array("1".utf8), messageID: "id-1")
            let again = try await jetStream.publish("events.a", payload: Array("1".utf8), messageID: "id-1")
            let second = try await jetStream.publish("events.b", payload: Array("2".utf8), messageID: "id-2")
            #expect(!first.duplicate && again.duplicate && again.sequence == first.sequence)
            #expect(second.sequence == first.sequence + 1)
            #expect(try await jetStream.streamInfo("EVENTS").state.messages == 2)
            await #expect(throws: NATSProtocolError.self) {
                _ = try await jetStream.publish("elsewhere", payload: [], messageID: "id-3")  // no stream: 503
            }
            await #expect(throws: JetStreamAPIError.self) { _ = try await jetStream.streamInfo("MISSING") }
        }
    }

    /// A durable pull consumer with max_ack_pending 1 hands out one message at a time, in order, to whoever pulls;
    /// a NAK brings the same message back first; a consumer created later starts from the stream's beginning.
    @Test func durablePullConsumerKeepsOrder() async throws {
        try await self.withServer { _, _, jetStream in
            var stream = JetStreamStreamConfiguration(name: "ORDERED", subjects: ["ordered.>"])
            stream.storage = "memory"
            try await jetStream.createOrUpdateStream(stream)
            for index in 1...5 {
                _ = try await jetStream.publish("ordered.p1", payload: Array("\(index)".utf8), messageID: "m\(index)")
            }
            _ = try await jetStream.publish("ordered.p2", payload: Array("other".utf8), messageID: "o1")
            try await jetStream.createOrUpdateConsumer(
                stream: "ORDERED", JetStreamConsumerConfiguration(durableName: "reader", filterSubject: "ordered.p1"))

            let first = try await jetStream.fetch(stream: "ORDERED", consumer: "reader", batch: 10, expires: .seconds(1))
            guard first.count == 1 else { Issue.record("expected one message, got \(first.count)"); return }
            #expect(first.map { String(decoding: $0.payload, as: UTF8.self) } == ["1"])  // one pending at most
            #expect(first.first?.pending == 4)
            // Nothing more while "1" waits for its ack, whoever asks.
            #expect(try await jetStream.fetch(stream: "ORDERED", consumer: "reader", batch: 1, expires: .milliseconds(300)).isEmpty)
            try await jetStream.nak(first[0])
            let redelivered = try await jetStream.fetch(stream: "ORDERED", consumer: "reader", batch: 1, expires: .seconds(2))
            #expect(redelivered.first?.payload == Array("1".utf8))
            #expect(redelivered.first?.deliveries == 2)
            var seen: [String] = []
            var message = redelivered.first
            while let current = message {
                seen.append(String(decoding: current.payload, as: UTF8.self))
                try await jetStream.ack(current)
                message = try await jetStream.fetch(
                    stream: "ORDERED", consumer: "reader", batch: 1, expires: .milliseconds(500)
                ).first
            }
            #expect(seen == ["1", "2", "3", "4", "5"])
            let info = try await jetStream.consumerInfo(stream: "ORDERED", consumer: "reader")
            #expect(info.pending == 0 && info.ackPending == 0 && info.ackFloor.streamSequence == 5)

            try await jetStream.createOrUpdateConsumer(
                stream: "ORDERED", JetStreamConsumerConfiguration(durableName: "late", filterSubject: "ordered.p1"))
            let replayed = try await jetStream.fetch(stream: "ORDERED", consumer: "late", batch: 1, expires: .seconds(1))
            #expect(replayed.first?.payload == Array("1".utf8) && replayed.first?.streamSequence == 1)
        }
    }

    /// Three nodes, a stream replicated on all three: the client moves to another node when its own is killed,
    /// and what was acknowledged before is all there, once.
    @Test func clusterSurvivesTheLossOfTheConnectedNode() async throws {
        try await self.withServer(nodes: 3) { cluster, client, jetStream in
            var stream = JetStreamStreamConfiguration(name: "REPLICATED", subjects: ["replicated.>"])
            stream.replicas = 3
            try await self.eventually("the cluster takes a replicated stream") {
                try await jetStream.createOrUpdateStream(stream)
                return true
            }
            for index in 1...20 {
                _ = try await jetStream.publish("replicated.a", payload: [], messageID: "before-\(index)")
            }
            let connected = client.connectedServer ?? ""
            let node = cluster.ports.firstIndex { connected.hasSuffix(":\($0)") } ?? 0
            cluster.kill(node)
            var published = 0
            try await self.eventually("publishing works again on the other nodes") {
                _ = try await jetStream.publish("replicated.a", payload: [], messageID: "after-\(published)")
                published += 1
                return true
            }
            #expect(client.isConnected)
            #expect(!(client.connectedServer ?? "").hasSuffix(":\(cluster.ports[node])"))
            try await self.eventually("the stream holds each message once") {
                try await jetStream.streamInfo("REPLICATED").state.messages == 21
            }
        }
    }
}
