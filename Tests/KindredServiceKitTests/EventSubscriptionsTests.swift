import Foundation
import KindredPostgres
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import Testing

/// A consumer is sent only the event types it applies (``EventSubscriptions``): appends of other types leave its
/// cursors alone, the relay reads only its types, and events it does not apply are purged without waiting for it.
@Suite struct EventSubscriptionsTests {
    @Test func aConsumerIsSentOnlyTheTypesItAppliesAndTheRestIsPurgedWithoutIt() async throws {
        let database = try await EventsDatabase.make()
        let consumer = TestConsumer(name: "sink", database: database.consumer)
        var configuration = database.relayConfiguration([try await consumer.start()])
        configuration.eventTypes["sink"] = [.userBlocked]
        let relay = try await database.relay(configuration)
        let registered = try await database.producer.query(
            "SELECT event_types FROM events_consumers WHERE consumer = 'sink'"
        ).scalar([String].self)
        #expect(registered == ["user.blocked"])
        let running = Task { await relay.run() }
        let swipe: Kindred.Common.V1.Event.Payload = .swipeRecorded(.with { $0.targetUserId = "someone" })
        var blocks: [Kindred.Common.V1.Event] = []
        for index in 0..<8 {
            let payload: Kindred.Common.V1.Event.Payload = index % 4 == 1 ? .userBlocked(.init()) : swipe
            let event = try await database.append(partition: "member", payload: payload)
            if index % 4 == 1 { blocks.append(event) }
        }
        #expect(try await eventually { try await database.effects().count == 2 })
        #expect(try await database.effects().map(\.eventID) == blocks.map(\.eventId))
        #expect(Set(consumer.control.withLock { $0.received }) == Set(blocks.map(\.eventId)))
        // The swipes after the last block marked nothing: the cursor ends at the block (once the relay recorded the
        // consumer's answer), and is not pending.
        func cursor() async throws -> (acknowledged: Int64, appended: Int64) {
            try await database.producer.query(
                "SELECT acknowledged_sequence, appended_sequence FROM events_cursors WHERE consumer = 'sink'"
            ).first!.decode((Int64, Int64).self)
        }
        _ = try await eventually { try await cursor().acknowledged == blocks[1].sequence }
        #expect(try await cursor() == (blocks[1].sequence, blocks[1].sequence))
        #expect(try await eventually { relay.metrics.consumer("sink").pending == 0 })
        // The batch form (match's group-committed swipes) marks the cursors the same way.
        try await database.producer.withTransaction { transaction in
            let events = [swipe, .userBlocked(.init()), swipe].map { payload in
                var event = Kindred.Common.V1.Event()
                event.userId = "batch"
                event.communityId = "dogs"
                event.payload = payload
                return event
            }
            try await transaction.execute(try database.outbox.appendQuery(events)!)
        }
        #expect(try await eventually { try await database.effects().count == 3 })
        let batch = try await database.producer.query(
            """
            SELECT o.sequence, c.appended_sequence FROM events_outbox o JOIN events_cursors c USING (partition_key)
            WHERE o.partition_key = 'batch' AND o.event_type = 'user.blocked'
            """
        ).first!.decode((Int64, Int64).self)
        #expect(batch.0 == batch.1)
        // The consumer's answer for the batch recorded (its effect is written before the relay hears the answer): until
        // then the block is not acknowledged and stays.
        #expect(
            try await eventually {
                try await database.producer.query(
                    """
                    SELECT acknowledged_sequence = appended_sequence FROM events_cursors
                    WHERE consumer = 'sink' AND partition_key = 'batch'
                    """
                ).scalar(Bool.self)
            })
        // Every event past the retention goes, the swipes behind the consumer's cursors included.
        try await database.producer.execute("UPDATE events_outbox SET created_at = now() - interval '8 days'")
        #expect(try await relay.purgeDelivered() == 11)
        running.cancel()
        await running.value
        await consumer.stop()
        await database.shutdown()
    }

    /// The table names real producers for each consumer it lists; a consumer it does not list gets every type, and a
    /// listed consumer nothing from a producer its entry does not name.
    @Test func theTableNamesProducersThatExist() {
        for consumer in ["auth", "chat", "match", "profile"] {
            let producers = EventSubscriptions.producers(of: consumer) ?? []
            #expect(!producers.isEmpty && producers.isSubset(of: ["auth", "profile", "match", "chat"]), "\(consumer)")
        }
        #expect(EventSubscriptions.types(of: "discovery", from: "match") == nil)
        #expect(EventSubscriptions.types(of: "chat", from: "notify") == [])
    }
}
