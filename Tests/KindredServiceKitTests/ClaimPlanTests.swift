import Foundation
import KindredPostgres
import Testing

@testable import KindredServiceKit

/// A relay's claim reads the cursors it leases and not the others: a claim runs after every commit that wakes a
/// relay, so a plan that reads every cursor row (as the statement joined to its due rows was planned, on a table of
/// a few thousand rows) costs PostgreSQL its whole table each time.
@Suite struct ClaimPlanTests {
    @Test func aClaimReadsTheDueCursorsByIndex() async throws {
        let database = try await EventsDatabase.make()
        // Four consumers with 600 partitions each, 3 % of them pending, the statistics gathered as a running
        // cluster's first ANALYZE gathers them.
        try await database.producer.execute(
            """
            INSERT INTO events_consumers (consumer) SELECT 'consumer-' || n FROM generate_series(1, 4) AS n
            """
        )
        try await database.producer.execute(
            """
            INSERT INTO events_cursors
                (consumer, partition_key, appended_sequence, acknowledged_sequence, pending_since)
            SELECT 'consumer-' || n, 'partition-' || p, p, CASE WHEN p % 33 = 0 THEN p - 1 ELSE p END,
                   CASE WHEN p % 33 = 0 THEN now() END
            FROM generate_series(1, 4) AS n, generate_series(1, 600) AS p
            """
        )
        try await database.producer.execute("ANALYZE events_cursors")
        let store = OutboxRelayStore(database: database.producer, owner: "test")
        let claim = store.claimQuery(consumer: "consumer-1", limit: 100, lease: .seconds(30))
        let explain = PostgresQuery(unsafeSQL: "EXPLAIN (COSTS OFF) " + claim.sql, bindings: claim.bindings)
        let plan = try await database.producer.query(explain).map { try $0.decode(String.self) }
        #expect(!plan.contains { $0.contains("Seq Scan on events_cursors") }, "\(plan.joined(separator: "\n"))")
        // And it claims what is due.
        #expect(try await store.claim(consumer: "consumer-1", limit: 100, lease: .seconds(30)).count == 18)
        await database.shutdown()
    }

    /// A relay records each batch in one statement, planned once per connection, often while `events_cursors` held a
    /// few rows: that plan must read each leased cursor by primary key when the table has thousands.
    @Test func aRecordPlannedOnAnEmptyTableReadsTheLeasedCursorsByPrimaryKey() async throws {
        let database = try await EventsDatabase.make()
        let store = OutboxRelayStore(database: database.producer, owner: "test")
        let outcomes = Dictionary(uniqueKeysWithValues: (1...40).map {
            ("partition-\($0)", DeliveryPlan.Outcome.delivered(acknowledged: Int64($0), count: 1))
        })
        let record = store.writeQuery(consumer: "consumer-1", outcomes, delays: [:], error: nil, skipHeld: true)
        let buffers = try await database.producer.withConnection { connection in
            // Planned now, on the empty table, as a relay's connection plans it on a cluster's first record.
            #expect(try await connection.query(record).count == 0)
            // Four consumers with 10,000 partitions each; the first consumer's first 40 leased by this relay.
            try await connection.execute(
                "INSERT INTO events_consumers (consumer) SELECT 'consumer-' || n FROM generate_series(1, 4) AS n")
            try await connection.execute(
                """
                INSERT INTO events_cursors (consumer, partition_key, appended_sequence, pending_since, leased_by)
                SELECT 'consumer-' || n, 'partition-' || p, p, now(), CASE WHEN n = 1 AND p <= 40 THEN 'test' END
                FROM generate_series(1, 4) AS n, generate_series(1, 10000) AS p
                """
            )
            try await connection.execute("BEGIN")
            let plan = try #require(try await connection.explainPreparedPlan(of: record))
            try await connection.execute("ROLLBACK")
            #expect(plan.actualRows == 40, "it writes the 40 leased cursors")
            return plan.buffers
        }
        // ~640 here: the lock step's read of the consumer's cursors (~240; a plan made on the empty table takes them
        // by consumer alone), then each cursor by key with its new version. Joined on the locked rows' consumer, the
        // write looked each cursor up by the key's second column alone, through the index: ~1,600, growing with the
        // table.
        #expect(buffers < 40 * 30, "the record read \(buffers) buffers for 40 cursors")
        await database.shutdown()
    }
}
