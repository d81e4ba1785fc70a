import Prometheus
import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredProto
import Testing

@testable import KindredServiceKit

/// The delivery rules as values, without I/O.
@Suite struct DeliveryPlanTests {
    private func event(_ partition: String, _ sequence: Int64) -> OutboxEvent {
        OutboxEvent(eventID: "\(partition)\(sequence)", partition: partition, sequence: sequence, payload: [])
    }

    private func claimed(
        _ partition: String, after acknowledged: Int64 = 0, through appended: Int64 = 1_000, attempts: Int = 0
    ) -> ClaimedPartition {
        ClaimedPartition(partition: partition, acknowledged: acknowledged, appended: appended, attempts: attempts)
    }

    @Test func batchKeepsOutboxOrderAndSkipsWhatIsNotNext() {
        let plan = DeliveryPlan(
            claimed: [claimed("a", after: 1), claimed("b")],
            events: [event("a", 1), event("a", 2), event("b", 1), event("c", 1), event("a", 4), event("b", 1)]
        )
        // a1 is already acknowledged, c is not claimed, the second b1 does not move b forward; a4 after a2 is a gap.
        #expect(plan.batch.map(\.eventID) == ["a2", "b1", "a4"])
    }

    @Test func batchStopsAtTheLimit() {
        let events = (1...150).map { event("a", Int64($0)) }
        let plan = DeliveryPlan(claimed: [claimed("a"), claimed("b", through: 7)], events: events, readLimit: 200)
        #expect(plan.batch.count == 100 && plan.batch.last?.sequence == 100)
        #expect(
            plan.outcomes(acknowledgedIDs: Set(plan.batch.map(\.eventID)))["a"]
                == .delivered(acknowledged: 100, count: 100)
        )
        // b had nothing in a read that was not cut short: nothing pending up to where it was claimed (an event
        // appended since is still to be sent).
        #expect(plan.outcomes(acknowledgedIDs: [])["b"] == .nothingPending(through: 7))
        let cut = DeliveryPlan(
            claimed: [claimed("a"), claimed("b")],
            events: Array(events.prefix(100)),
            readLimit: 100
        )
        #expect(cut.outcomes(acknowledgedIDs: [])["b"] == .untouched)
    }

    /// Acknowledged ids → outcome of partition a (events a1, a2, a3 sent).
    static let prefixes: [([String], DeliveryPlan.Outcome)] = [
        (["a1", "a2", "a3"], .delivered(acknowledged: 3, count: 3)),
        (["a1", "a2"], .failed(acknowledged: 2, count: 2)),
        (["a1", "a3"], .failed(acknowledged: 1, count: 1)),  // a3 after a missing a2: not trusted
        (["a2", "a3"], .failed(acknowledged: 0, count: 0)),
        ([], .failed(acknowledged: 0, count: 0)),
    ]

    @Test(arguments: Self.prefixes)
    func cursorMovesToTheAcknowledgedPrefix(acknowledged: [String], expected: DeliveryPlan.Outcome) {
        let plan = DeliveryPlan(
            claimed: [claimed("a"), claimed("b")],
            events: [event("a", 1), event("b", 1), event("a", 2), event("a", 3)]
        )
        let outcomes = plan.outcomes(acknowledgedIDs: Set(acknowledged + ["b1"]))
        #expect(outcomes["a"] == expected)
        #expect(outcomes["b"] == .delivered(acknowledged: 1, count: 1))
    }

    @Test func aFailedCallFailsEverySentPartition() {
        let plan = DeliveryPlan(
            claimed: [claimed("a", after: 4), claimed("b", after: 2)],
            events: [event("a", 5), event("b", 3)]
        )
        #expect(
            plan.outcomesOfFailedCall() == [
                "a": .failed(acknowledged: 4, count: 0), "b": .failed(acknowledged: 2, count: 0),
            ]
        )
    }

    @Test func backoffDoublesToItsCapWithJitterInTheUpperHalf() {
        let backoff = RetryBackoff(initial: .milliseconds(200), maximum: .seconds(60))
        #expect(
            (1...6).map { backoff.nominal(afterFailures: $0) }
                == [200, 400, 800, 1600, 3200, 6400].map { .milliseconds($0) }
        )
        #expect(backoff.nominal(afterFailures: 20) == .seconds(60))
        #expect(backoff.nominal(afterFailures: 500) == .seconds(60))
        #expect(backoff.delay(afterFailures: 3, unit: 0) == .milliseconds(400))
        #expect(backoff.delay(afterFailures: 3, unit: 1) == .milliseconds(800))
        #expect(backoff.delay(afterFailures: 3, unit: 0.5) == .milliseconds(600))
    }

    @Test(arguments: [
        ("", [String]()),
        ("profile=127.0.0.1:50052", ["profile=127.0.0.1:50052"]),
        (" profile=db:1 , chat=[::1]:50055 ", ["profile=db:1", "chat=[::1]:50055"]),
        ("chat=127.0.0.1:50055|127.0.0.1:50065", ["chat=127.0.0.1:50055|127.0.0.1:50065"]),
    ])
    func consumerListsParse(text: String, expected: [String]) throws {
        #expect(try EventConsumer.parseList(text, key: "K").map(\.description) == expected)
    }

    @Test(arguments: [
        "profile", "profile=host", "profile=host:0", "profile=host:70000", "Profile=h:1", "=h:1", "a=:1", "a=h:1,a=h:2",
        "a=h:1|", "a=h:1|h:1", "a=h:1|h:0",
    ])
    func badConsumerListsNameTheKey(text: String) {
        #expect(throws: ConfigurationError.self) { try EventConsumer.parseList(text, key: "KINDRED_X_EVENT_CONSUMERS") }
        do { _ = try EventConsumer.parseList(text, key: "KINDRED_X_EVENT_CONSUMERS") } catch {
            #expect(error.key == "KINDRED_X_EVENT_CONSUMERS")
        }
    }

    @Test func consumerServicePaths() {
        #expect(
            DeliverEventsMethod.method(for: EventConsumer(name: "discovery", host: "h", port: 1)).path
                == "/kindred.discovery.v1.DiscoveryService/DeliverEvents"
        )
        #expect(
            Kindred.Chat.V1.ChatService.Method.deliverEvents.path
                == DeliverEventsMethod.method(for: EventConsumer(name: "chat", host: "h", port: 1)).path
        )
    }

    @Test func inboxStopsAPartitionAtItsFirstFailureAndKeepsOthersGoing() {
        func event(_ producer: String, _ user: String, _ id: String) -> Kindred.Common.V1.Event {
            var event = Kindred.Common.V1.Event()
            event.producer = producer
            event.userId = user
            event.eventId = id
            return event
        }
        var batch = InboxBatch()
        let a1 = event("auth", "a", "1"), a2 = event("auth", "a", "2"), b1 = event("auth", "b", "3")
        let matchA = event("match", "a", "4")
        #expect(batch.shouldProcess(a1))
        batch.fail(a1)
        #expect(!batch.shouldProcess(a2))
        #expect(batch.shouldProcess(b1) && batch.shouldProcess(matchA))  // partitions are per producer
        batch.acknowledge(b1)
        batch.acknowledge(matchA)
        #expect(batch.acknowledged == ["3", "4"])
    }

    @Test func metricsRenderPerConsumer() {
        let server = ServerMetrics(registry: PrometheusCollectorRegistry())
        let metrics = EventRelayMetrics(producer: "auth", consumers: ["chat", "profile"], factory: server.factory)
        metrics.recordDelivered("chat", count: 3)
        let text = server.prometheusText()
        for (name, zero) in [
            ("kindred_events_pending", "0.0"), ("kindred_events_oldest_pending_seconds", "0.0"),
            ("kindred_events_delivered_total", "0"), ("kindred_events_delivery_failures_total", "0"),
        ] {
            #expect(text.contains("\(name){producer=\"auth\",consumer=\"profile\"} \(zero)"))
        }
        #expect(text.contains("kindred_events_delivered_total{producer=\"auth\",consumer=\"chat\"} 3\n"))
        #expect(metrics.consumer("chat").delivered == 3)
    }
}
