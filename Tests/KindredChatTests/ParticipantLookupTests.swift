import KindredPostgres
import Testing

@testable import KindredChat

/// The send path locks both participants' rows by primary key, never by reading the whole `users` table.
@Suite("Chat's participant lookup against a real PostgreSQL", .serialized)
struct ParticipantLookupTests {
    @Test func sendingLocksTheTwoParticipantsWithoutScanningUsers() async throws {
        try await ChatHarness.with { chat in
            let (alice, bob) = (try await chat.user("alice"), try await chat.user("bob"))
            let thread = try await chat.thread(alice, bob)
            // A community of 630 members: about the size at which a hash join over a scan of `users` looks cheapest
            // to the planner; and the plan at 100,000.
            for members in [630, 100_000 - 632] {
                try await chat.database.execute(
                    "INSERT INTO users (user_id) SELECT gen_random_uuid() FROM generate_series(1, \(members))")
                try await chat.database.execute("ANALYZE")
                let query = ThreadStore.lockParticipantsQuery(of: thread, for: alice.id)
                let plan = try await chat.database.query(
                    PostgresQuery(unsafeSQL: "EXPLAIN " + query.sql, bindings: query.bindings)
                ).map { try $0.decode(String.self, at: 0) }.joined(separator: "\n")
                #expect(plan.contains("users_pkey") && !plan.contains("Seq Scan on users"), "\(plan)")
                let locked = try await chat.database.withTransaction { transaction in
                    try await transaction.query(query).count
                }
                #expect(locked == 2)
            }
            let sent = try await chat.send(alice, thread, "hello")
            #expect(sent.message?.sequence == 1)
        }
    }
}
