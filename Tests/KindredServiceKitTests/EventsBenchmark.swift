import Foundation
import KindredServiceKit
import Testing

/// Delivery throughput and latency of the relay with a consumer in the same process. A measurement, not a
/// check: it runs only with KINDRED_EVENTS_BENCH=1 and prints its figures.
///
///     KINDRED_EVENTS_BENCH=1 swift test --skip-build --filter EventsBenchmark
@Suite(.enabled(if: ProcessInfo.processInfo.environment["KINDRED_EVENTS_BENCH"] == "1"))
struct EventsBenchmark {
    @Test func deliverTwoThousandEventsOnTwoHundredPartitions() async throws {
        let database = try await EventsDatabase.make()
        let consumer = TestConsumer(name: "sink", database: database.consumer)
        let relay = try await database.relay(database.relayConfiguration([try await consumer.start()]))
        let appendStart = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<4 {
                group.addTask {
                    for index in 0..<500 {
                        try await database.append(partition: "user-\((writer * 500 + index) % 200)")
                    }
                }
            }
            try await group.waitForAll()
        }
        let appended = ContinuousClock.now - appendStart
        let deliveryStart = ContinuousClock.now
        let running = Task { await relay.run() }
        _ = try await eventually(timeout: .seconds(120)) { relay.metrics.consumer("sink").delivered >= 2000 }
        let delivered = ContinuousClock.now - deliveryStart
        // One more event with the relay idle: commit-to-effect latency through NOTIFY.
        var latencies: [Duration] = []
        for _ in 0..<20 {
            let before = try await database.effects().count
            let start = ContinuousClock.now
            try await database.append(partition: "latency")
            _ = try await eventually { try await database.effects().count > before }
            latencies.append(ContinuousClock.now - start)
        }
        latencies.sort()
        print("events bench: append 2000 (4 writers) \(appended); deliver 2000 \(delivered)")
        print("events bench: \(Int(2000 / delivered.seconds)) events/s; commit-to-effect p50 \(latencies[10]) max \(latencies[19])")
        running.cancel()
        await running.value
        await consumer.stop()
        await database.shutdown()
    }
}

extension Duration {
    fileprivate var seconds: Double { Double(self.components.seconds) + Double(self.components.attoseconds) / 1e18 }
}
