import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import Testing

/// The consumer side against a real PostgreSQL, without gRPC.
@Suite struct EventInboxTests {
    private func event(_ partition: String, _ sequence: Int64, producer: String = "producer") throws
        -> Kindred.Common.V1.Event
    {
        var event = Kindred.Common.V1.Event()
        event.eventId = try UUIDv7.generate()
        event.producer = producer
        event.userId = partition
        event.sequence = sequence
        event.payload = .userUnblocked(.with { $0.unblockedUserId = "x" })
        return event
    }

    @Test func aFailedEventHoldsBackTheRestOfItsPartitionOnly() async throws {
        let database = try await EventsDatabase.make()
        let inbox = EventInbox(database: database.consumer, logger: testLogger)
        let events = [try event("a", 1), try event("b", 1), try event("a", 2), try event("b", 2), try event("a", 3)]
        let failing = events[0].eventId
        let acknowledged = try await inbox.process(events, from: "producer") { event, transaction in
            if event.eventId == failing { throw CancellationError() }
            try await transaction.execute(
                """
                INSERT INTO effects (event_id, partition_key, sequence)
                VALUES (\(event.eventId)::uuid, \(event.partitionKey), \(event.sequence))
                """
            )
        }
        #expect(acknowledged == [events[1].eventId, events[3].eventId])
        // The failed event left no id behind: its redelivery applies it.
        let again = try await inbox.process(events, from: "producer") { event, transaction in
            try await transaction.execute(
                """
                INSERT INTO effects (event_id, partition_key, sequence)
                VALUES (\(event.eventId)::uuid, \(event.partitionKey), \(event.sequence))
                """
            )
        }
        #expect(again == events.map(\.eventId))
        let effects = try await database.effects()
        #expect(effects.count == 5 && inOrderExactlyOnce(effects))
        await database.shutdown()
    }

    /// The batch path: applied whole without savepoints while every handler succeeds, and again event by event in
    /// savepoints when one throws. Either way an effect is committed exactly once with its id, a failed event leaves
    /// no id and holds the rest of its partition, and a duplicate (in the batch, or applied before) has no effect.
    @Test func aBatchInOneTransactionAppliesEachEventOnceAndHoldsOnlyAFailedPartition() async throws {
        let database = try await EventsDatabase.make()
        let inbox = EventInbox(database: database.consumer, logger: testLogger)
        let events = [try event("a", 1), try event("b", 1), try event("a", 2), try event("b", 2), try event("a", 3)]
        func insert(_ event: Kindred.Common.V1.Event, _ transaction: PostgresTransaction) async throws {
            try await transaction.execute(
                """
                INSERT INTO effects (event_id, partition_key, sequence)
                VALUES (\(event.eventId)::uuid, \(event.partitionKey), \(event.sequence))
                """
            )
        }
        // b's first event applied before; the batch carries a's second event twice.
        _ = try await inbox.processInOneTransaction([events[1]], from: "producer", state: 0) { event, transaction, _ in
            try await insert(event, transaction)
        }
        let batch = [events[0], events[1], events[2], events[2], events[3], events[4]]
        let failing = events[2].eventId
        let first = try await inbox.processInOneTransaction(batch, from: "producer", state: 0) {
            event, transaction, handled in
            try await insert(event, transaction)
            handled += 1
            if event.eventId == failing { throw CancellationError() }
        }
        // a's first, b's first (applied before), b's second; a's second failed and holds a's third.
        #expect(first.acknowledged == [events[0].eventId, events[1].eventId, events[3].eventId])
        #expect(first.state == 2, "the state of the events applied (a1, b2), the failed one's dropped")
        #expect(Set(try await database.effects().map(\.eventID)) == Set([0, 1, 3].map { events[$0].eventId }))
        // Everything succeeds now: the rest is applied once, duplicates acknowledged without effect.
        let again = try await inbox.processInOneTransaction(batch, from: "producer", state: 0) {
            event, transaction, handled in
            try await insert(event, transaction)
            handled += 1
        }
        #expect(again.acknowledged == batch.map(\.eventId))
        #expect(again.state == 2, "only a2 and a3 were new")
        let effects = try await database.effects()
        #expect(effects.count == 5 && inOrderExactlyOnce(effects))
        await database.shutdown()
    }

    @Test func batchesTooLargeOrFromAnotherProducerAreRefusedWhole() async throws {
        let database = try await EventsDatabase.make()
        let inbox = EventInbox(database: database.consumer, logger: testLogger)
        let tooMany = try (1...101).map { try event("a", Int64($0)) }
        let forged = [try event("a", 1), try event("b", 1, producer: "auth")]
        for batch in [tooMany, forged] {
            await #expect {
                _ = try await inbox.process(batch, from: "producer") { _, _ in }
            } throws: { ($0 as? RPCError)?.code == .invalidArgument }
        }
        let recorded = try await database.consumer.query("SELECT count(*) FROM events_inbox").scalar(Int64.self)
        #expect(recorded == 0)
        #expect(try await inbox.process([], from: "producer") { _, _ in }.isEmpty)
        await database.shutdown()
    }

    @Test func purgeKeepsIdsYoungerThanTheRetention() async throws {
        let database = try await EventsDatabase.make()
        let inbox = EventInbox(database: database.consumer, logger: testLogger)
        let old = try event("a", 1)
        let recent = try event("a", 2)
        _ = try await inbox.process([old, recent], from: "producer") { _, _ in }
        try await database.consumer.execute(
            "UPDATE events_inbox SET processed_at = now() - interval '9 days' WHERE event_id = \(old.eventId)::uuid"
        )
        #expect(try await inbox.purge() == 1)
        let kept = try await database.consumer.query("SELECT event_id::text FROM events_inbox").map {
            try $0.decode(String.self, at: 0)
        }
        #expect(kept == [recent.eventId])
        await database.shutdown()
    }

    @Test func outboxRefusesEventsWithoutPartitionOrPayload() async throws {
        let database = try await EventsDatabase.make()
        var noPartition = Kindred.Common.V1.Event()
        noPartition.payload = .userBlocked(.init())
        var noPayload = Kindred.Common.V1.Event()
        noPayload.userId = "a"
        for event in [noPartition, noPayload] {
            await #expect(throws: OutboxError.self) {
                try await database.producer.withTransaction { try await database.outbox.append(event, in: $0) }
            }
        }
        // Community events are ordered per community.
        var community = Kindred.Common.V1.Event()
        community.communityId = "dogs"
        community.payload = .communityUpdated(.init())
        let written = try await database.producer.withTransaction {
            try await database.outbox.append(community, in: $0)
        }
        #expect(written.sequence > 0 && written.producer == "producer" && UUIDv7.isValid(written.eventId))
        let partition = try await database.producer.query("SELECT partition_key FROM events_outbox").scalar(String.self)
        #expect(partition == "dogs")
        await database.shutdown()
    }
}
