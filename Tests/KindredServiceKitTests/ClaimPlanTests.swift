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
}
