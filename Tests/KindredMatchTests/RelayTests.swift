import Foundation
import KindredGRPC
import KindredIdentity
import KindredProto
import KindredServiceKit
import Logging
import Synchronization
import Testing

/// Events appended by the group commit (one statement per batch) reach a consumer through the kit's relay, in
/// order per partition, with their sequences.
@Suite struct RelayTests {
    /// A discovery stand-in (discovery takes every event of match): DeliverEvents for match's service token,
    /// recording what arrives.
    final class Consumer: GRPCService, Sendable {
        let received = Mutex<[CommonApi.Event]>([])
        let access = ServiceAccess(authenticator: CallerAuthenticator(keys: testKeys.trustedKeys))

        func register(in router: inout GRPCRouter) {
            router.unary(Kindred.Discovery.V1.DiscoveryService.Method.deliverEvents) { request, context in
                try await self.access.requireService(["match"], context)
                self.received.withLock { $0 += request.events }
                var response = CommonApi.DeliverEventsResponse()
                response.acknowledgedEventIds = request.events.map(\.eventId)
                return response
            }
        }
    }

    /// Match with its relay delivering to a `Consumer`, polling every `pollMilliseconds`.
    static func withConsumer(pollMilliseconds: Int, _ body: (Consumer, MatchHarness) async throws -> Void)
        async throws
    {
        let consumer = Consumer()
        var configuration = GRPCServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        var logger = Logger(label: "kindred.match.test.consumer")
        logger.logLevel = .error
        let server = GRPCServer(configuration: configuration, services: [consumer], logger: logger)
        let port = try await server.start().port ?? 0
        do {
            try await MatchHarness.with(settings: [
                "KINDRED_MATCH_EVENT_CONSUMERS": "discovery=127.0.0.1:\(port)",
                "KINDRED_MATCH_EVENT_POLL_MS": "\(pollMilliseconds)",
            ]) { h in try await body(consumer, h) }
        } catch {
            await server.shutdown(grace: .milliseconds(200))
            throw error
        }
        await server.shutdown(grace: .milliseconds(200))
    }

    /// A group commit wakes the relay after it commits: its events arrive long before the relay's poll (a minute).
    @Test func aGroupCommitWakesTheRelay() async throws {
        try await Self.withConsumer(pollMilliseconds: 60_000) { consumer, h in
            try await h.community("dating")
            let m = try await h.members(2, community: "dating")
            try await h.swipe(m[0], m[1], .like)
            let deadline = ContinuousClock.now + .seconds(20)
            while consumer.received.withLock({ $0.isEmpty }), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(consumer.received.withLock { $0.map { $0.payload?.typeName } } == ["swipe.recorded"])
        }
    }

    @Test func batchAppendedEventsAreDeliveredInOrderWithTheirSequences() async throws {
        try await Self.withConsumer(pollMilliseconds: 100) { consumer, h in
            try await h.community("dating")
            let m = try await h.members(3, community: "dating")
            try await h.swipe(m[0], m[1], .like)
            try await h.swipe(m[0], m[2], .pass)
            let match = try await h.swipe(m[1], m[0], .like).match
            let deadline = ContinuousClock.now + .seconds(30)
            while consumer.received.withLock({ $0.count }) < 4, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            let events = consumer.received.withLock { $0 }
            let first = events.filter { $0.userId == m[0].id }
            #expect(first.map { $0.payload?.typeName } == ["swipe.recorded", "swipe.recorded"])
            #expect(first.map(\.sequence) == first.map(\.sequence).sorted() && Set(first.map(\.sequence)).count == 2)
            #expect(first.allSatisfy { $0.sequence > 0 && $0.producer == "match" && !$0.eventId.isEmpty })
            let created = events.compactMap { event -> Kindred.Common.V1.MatchCreated? in
                if case .matchCreated(let created)? = event.payload { return created }
                return nil
            }
            #expect(created.map(\.matchId) == [match?.matchId ?? "-"])
            #expect(created.first?.userIds == [m[0].id, m[1].id].sorted())
            #expect(created.first?.initiatorUserId == m[0].id)
        }
    }
}
