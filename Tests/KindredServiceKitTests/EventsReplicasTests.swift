import KindredGRPCServices
import KindredServiceKit
import Testing

/// A consumer with two replicas on one inbox database, fed by one relay through its balanced client.
@Suite struct EventsReplicasTests {
    @Test func bothReplicasTakeBatchesAndEveryEventArrivesOnceInOrderWhenOneStops() async throws {
        let database = try await EventsDatabase.make()
        let first = TestConsumer(name: "sink", database: database.consumer)
        let second = TestConsumer(name: "sink", database: database.consumer)
        let replicas = [try await first.start(), try await second.start()].map(\.address.first)
        var configuration = database.relayConfiguration([
            EventConsumer(name: "sink", address: try #require(ServiceAddress(replicas: replicas)))
        ])
        configuration.maxBatch = 3  // many calls, so that both replicas get some
        let relay = try await database.relay(configuration)
        let running = Task { await relay.run() }
        for index in 0..<60 { try await database.append(partition: "user-\(index % 4)") }
        #expect(try await eventually { try await database.effects().count == 60 })
        #expect(first.control.withLock { !$0.received.isEmpty } && second.control.withLock { !$0.received.isEmpty })
        // One replica stops (GOAWAY, then closed): the other takes every later batch.
        await second.stop()
        for index in 0..<30 { try await database.append(partition: "user-\(index % 4)") }
        #expect(try await eventually { try await database.effects().count == 90 })
        #expect(inOrderExactlyOnce(try await database.effects()))
        running.cancel()
        await running.value
        await first.stop()
        await database.shutdown()
    }
}
