import KindredPostgres
import KindredProto
import Testing

@testable import KindredServiceKit

/// An append and the relay's record of a batch lock the same cursor rows (`events_cursors`, one per consumer and
/// partition). The record writes the rows no append holds and then waits on each held one alone, holding no other:
/// a transaction appending to several partitions and a relay recording several cannot wait on each other in a
/// circle (PostgreSQL would end one with a deadlock), and an append never queues behind a record.
@Suite struct OutboxLockOrderTests {
    @Test func aRecordWaitingOnAnOpenAppendHoldsNoOtherPartition() async throws {
        let database = try await EventsDatabase.make()
        let store = OutboxRelayStore(database: database.producer, owner: "relay-under-test")
        for round in 0..<3 {
            // A consumer per round (the earlier ones stay registered: appends lock their cursors too).
            let consumer = "sink\(round)"
            try await store.register(consumers: [consumer])
            let partitions = (0..<20).map { "round\(round)-p" + ($0 < 10 ? "0" : "") + "\($0)" }
            // Cursors created in descending key order (the table's physical order), then leased by the relay.
            for partition in partitions.reversed() { try await database.append(partition: partition) }
            let claimed = try await store.claim(consumer: consumer, limit: 100, lease: .seconds(60))
            #expect(Set(claimed.map(\.partition)) == Set(partitions))
            var outcomes: [String: DeliveryPlan.Outcome] = [:]
            for partition in claimed {
                outcomes[partition.partition] = .delivered(acknowledged: partition.acknowledged + 1, count: 1)
            }
            let recordOutcomes = outcomes
            // A producer's transaction appends to the lowest partition, the relay records the whole batch (and
            // waits on that partition's cursor), then the transaction appends to every other partition, in key
            // order as a batch append does, and commits.
            let recording = try await database.producer.withTransaction(maxAttempts: 1) { transaction in
                try await database.outbox.append(Self.event(partitions[0]), in: transaction)
                let recording = Task {
                    try await store.record(consumer: consumer, outcomes: recordOutcomes, delays: [:], error: nil)
                }
                #expect(try await eventually(timeout: .seconds(10)) { try await Self.recordIsWaitingOnALock(database) })
                if let batch = try database.outbox.appendQuery(partitions.dropFirst().map(Self.event)) {
                    try await transaction.execute(batch)
                }
                return recording
            }
            try await recording.value
            // Both went through: every cursor is acknowledged up to the relay's outcome and still has the new event.
            let rows = try await database.producer.query(
                """
                SELECT count(*) FROM events_cursors WHERE consumer = \(consumer) AND partition_key LIKE \("round\(round)-%")
                  AND leased_by IS NULL AND acknowledged_sequence < appended_sequence
                """
            ).scalar(Int64.self)
            #expect(rows == 20)
        }
        await database.shutdown()
    }

    /// While the relay waits for an open append to the batch's last partition, an append to its first partition
    /// goes through at once: the relay holds no cursor while it waits (it used to hold the batch's earlier
    /// cursors, so that append queued behind an unrelated transaction until `lock_timeout` ended it).
    @Test func anAppendNeverQueuesBehindARecordWaitingOnAnotherPartition() async throws {
        let database = try await EventsDatabase.make()
        let store = OutboxRelayStore(database: database.producer, owner: "relay-under-test")
        try await store.register(consumers: ["sink"])
        let partitions = (0..<5).map { "queue-p\($0)" }
        var appended: [String: Int64] = [:]
        for partition in partitions { appended[partition] = try await database.append(partition: partition).sequence }
        let claimed = try await store.claim(consumer: "sink", limit: 100, lease: .seconds(60))
        #expect(claimed.count == partitions.count)
        // Each partition delivered up to its one event.
        let outcomes = Dictionary(uniqueKeysWithValues: claimed.map {
            ($0.partition, DeliveryPlan.Outcome.delivered(acknowledged: appended[$0.partition]!, count: 1))
        })
        let recording = try await database.producer.withTransaction(maxAttempts: 1) { transaction in
            try await database.outbox.append(Self.event(partitions[4]), in: transaction)
            let recording = Task {
                try await store.record(consumer: "sink", outcomes: outcomes, delays: [:], error: nil)
            }
            #expect(try await eventually(timeout: .seconds(10)) { try await Self.recordIsWaitingOnALock(database) })
            // Another producer's transaction appends to the first partition. The relay holds no cursor now, so this
            // waits for no lock at all, however loaded the machine. Were the relay holding the first partition, this
            // append would wait until the relay's own lock_timeout (2 s) ended its statement: it allows itself 200 ms.
            try await database.producer.withTransaction(maxAttempts: 1) { other in
                try await other.execute("SET LOCAL lock_timeout = '200ms'")
                try await database.outbox.append(Self.event(partitions[0]), in: other)
            }
            return recording
        }
        do {
            try await recording.value
        } catch let error as PostgresError where error.code == .lockTimeout {
            // A loaded machine kept the transaction above open past the relay's own lock_timeout (2 s) on the last
            // partition: the relay records that partition again, as its next round would.
            try await store.record(consumer: "sink", outcomes: outcomes, delays: [:], error: nil)
        }
        let pending = try await database.producer.query(
            """
            SELECT count(*) FROM events_cursors
            WHERE consumer = 'sink' AND leased_by IS NULL AND acknowledged_sequence < appended_sequence
            """
        ).scalar(Int64.self)
        #expect(pending == 2)  // the two partitions with a new event since the batch
        await database.shutdown()
    }

    static func event(_ partition: String) -> Kindred.Common.V1.Event {
        var event = Kindred.Common.V1.Event()
        event.userId = partition
        event.communityId = "dogs"
        event.payload = .userBlocked(.with { $0.blockedUserId = "someone" })
        return event
    }

    /// The relay's UPDATE waits on a row lock held by another transaction, in this test's database (tests running
    /// beside it share the server, and their relays wait on locks of their own).
    static func recordIsWaitingOnALock(_ database: EventsDatabase) async throws -> Bool {
        try await database.producer.query(
            """
            SELECT count(*) FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'
              AND query LIKE '%leased_by = NULL, leased_until = NULL%'
            """
        ).scalar(Int64.self) > 0
    }
}
