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
