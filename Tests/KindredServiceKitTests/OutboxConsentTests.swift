import KindredPostgres
import KindredProto
import KindredServiceKit
import Testing

/// The two outbox operations behind consent across services: waiting until every consumer applied a partition's
/// events (match's Block), and a deleted account's erasure from a producer's outbox (its events replaced by one
/// AccountDeleted at the end of the partition).
@Suite struct OutboxConsentTests {
    @Test func awaitDeliveryIsTrueOnlyOnceEveryConsumerAcknowledged() async throws {
        let database = try await EventsDatabase.make()
        let consumer = TestConsumer(name: "sink", database: database.consumer)
        let relay = try await database.relay(database.relayConfiguration([try await consumer.start()]))
        // Nothing appended: nothing to wait for.
        #expect(try await database.outbox.awaitDelivery(partition: "user-0", consumers: ["sink"], on: database.producer, timeout: .zero))
        // Appended while no relay runs: still pending at the end of the wait.
        try await database.append(partition: "user-1")
        #expect(
            try await !database.outbox.awaitDelivery(
                partition: "user-1", consumers: ["sink"], on: database.producer, timeout: .milliseconds(200)))
        // No consumers configured (no relay): nobody to wait for.
        #expect(try await database.outbox.awaitDelivery(partition: "user-1", consumers: [], on: database.producer))
        let running = Task { await relay.run() }
        #expect(try await database.outbox.awaitDelivery(partition: "user-1", consumers: ["sink"], on: database.producer, timeout: .seconds(10)))
        #expect(try await database.effects().map(\.partition) == ["user-1"])
        running.cancel()
        await running.value
        await consumer.stop()
        await database.shutdown()
    }

    /// A consumer sent only some types is waited for only for those: the partition's last event being of another
    /// type (a swipe after the block) does not hold the wait until its timeout.
    @Test func awaitDeliveryWaitsOnlyForTheTypesAConsumerApplies() async throws {
        let database = try await EventsDatabase.make()
        let consumer = TestConsumer(name: "sink", database: database.consumer)
        var configuration = database.relayConfiguration([try await consumer.start()])
        configuration.eventTypes["sink"] = [.userBlocked]
        let relay = try await database.relay(configuration)
        let running = Task { await relay.run() }
        try await database.append(partition: "user-1")
        try await database.append(partition: "user-1", payload: .swipeRecorded(.with { $0.targetUserId = "someone" }))
        #expect(
            try await database.outbox.awaitDelivery(
                partition: "user-1", consumers: ["sink"], on: database.producer, timeout: .seconds(5)))
        #expect(try await database.effects().map(\.partition) == ["user-1"])
        running.cancel()
        await running.value
        await consumer.stop()
        await database.shutdown()
    }

    @Test func eraseUserLeavesOnlyTheDeletionNoticeAndTheRelayDeliversIt() async throws {
        let database = try await EventsDatabase.make()
        let consumer = TestConsumer(name: "sink", database: database.consumer)
        let relay = try await database.relay(database.relayConfiguration([try await consumer.start()]))
        var last: Int64 = 0
        for _ in 0..<3 { last = try await database.append(partition: "user-1").sequence }
        try await database.append(partition: "user-2")
        try await database.producer.withTransaction { transaction in
            try await database.outbox.eraseUser("user-1", community: "dogs", in: transaction)
        }
        let left = try await database.producer.query(
            "SELECT event_type, sequence FROM events_outbox WHERE partition_key = 'user-1'"
        ).map { try $0.decode((String, Int64).self) }
        #expect(left.count == 1 && left[0].0 == "account.deleted" && left[0].1 > last)
        let running = Task { await relay.run() }
        #expect(try await database.outbox.awaitDelivery(partition: "user-1", consumers: ["sink"], on: database.producer, timeout: .seconds(10)))
        #expect(try await database.outbox.awaitDelivery(partition: "user-2", consumers: ["sink"], on: database.producer, timeout: .seconds(10)))
        let effects = try await database.effects()
        #expect(effects.filter { $0.partition == "user-1" }.map(\.sequence) == [left[0].1])
        #expect(effects.filter { $0.partition == "user-2" }.count == 1)
        running.cancel()
        await running.value
        await consumer.stop()
        await database.shutdown()
    }
}
