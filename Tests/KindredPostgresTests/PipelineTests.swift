import KindredPostgres
import Testing

/// Each test runs with the client's poller reading the results (`polled`) and with a pool thread waiting for them.
@Suite struct PipelineTests {
    @Test(arguments: [true, false])
    func aHundredInsertsThenAHundredSelectsInOneRoundTripEach(polled: Bool) async throws {
        try await withTestClient(polled: polled) { client in
            try await client.execute("CREATE TABLE items (id bigserial PRIMARY KEY, name text NOT NULL)")
            let inserts: [PostgresQuery] = (0..<100).map {
                "INSERT INTO items (name) VALUES (\("item \($0)")) RETURNING id"
            }
            let inserted = try await client.pipeline(inserts)
            #expect(inserted.count == 100)
            let ids = try inserted.map { try $0.scalar(Int64.self) }
            #expect(ids == Array(1...100))

            let selects: [PostgresQuery] = ids.reversed().map { "SELECT name FROM items WHERE id = \($0)" }
            let names = try await client.pipeline(selects).map { try $0.scalar(String.self) }
            #expect(names == (0..<100).reversed().map { "item \($0)" })
        }
    }

    @Test(arguments: [true, false]) func oneFailingStatementFailsTheBatchAndUndoesIt(polled: Bool) async throws {
        try await withTestClient(polled: polled) { client in
            try await client.execute("CREATE TABLE items (id int PRIMARY KEY)")
            try await client.withConnection { connection in
                let error = await #expect(throws: PostgresError.self) {
                    _ = try await connection.pipeline([
                        "INSERT INTO items VALUES (1)",
                        "INSERT INTO items VALUES (1)",
                        "INSERT INTO items VALUES (3)",
                    ])
                }
                #expect(error?.code == .uniqueViolation)
                // The batch was one implicit transaction; the connection is usable afterwards.
                #expect(try await connection.query("SELECT count(*) FROM items").scalar(Int.self) == 0)
                let again = try await connection.pipeline([
                    "INSERT INTO items VALUES (5)", "SELECT count(*) FROM items",
                ])
                #expect(try again[1].scalar(Int.self) == 1)
            }
        }
    }

    @Test(arguments: [true, false]) func pipelinesInsideTransactionsAndWithCachedStatements(polled: Bool) async throws {
        try await withTestClient(polled: polled) { client in
            try await client.execute("CREATE TABLE items (id int PRIMARY KEY, note text)")
            try await client.withConnection { connection in
                // Prepared (cached) by an ordinary call first, then used by the pipeline.
                try await connection.execute("INSERT INTO items VALUES (\(Int32(0)), \("zero"))")
                _ = try await connection.pipeline(
                    (1...20).map { "INSERT INTO items VALUES (\(Int32($0)), \("n\($0)"))" }
                )
            }
            try await client.withTransaction { tx in
                let results = try await tx.pipeline(
                    (0...20).map { "SELECT note FROM items WHERE id = \(Int32($0))" } + ["SELECT \(Int64(7))"]
                )
                #expect(try results[0].scalar(String.self) == "zero")
                #expect(try results[20].scalar(String.self) == "n20")
                #expect(try results[21].scalar(Int64.self) == 7)
            }
        }
    }

    /// A statement first run in a pipeline is prepared there, so PostgreSQL can keep its plan (an unnamed
    /// statement is planned at every run), and later calls use the prepared one. A preparation the server skipped
    /// (its group failed first) is not remembered.
    @Test(arguments: [true, false])
    func aStatementFirstRunInAPipelineIsPreparedForLaterCalls(polled: Bool) async throws {
        try await withTestClient(polled: polled) { client in
            try await client.execute("CREATE TABLE items (id int PRIMARY KEY)")
            let insert = "INSERT INTO items VALUES ($1)"
            let skipped = "SELECT count(*) FROM items WHERE id > $1"
            func prepared(_ sql: String) -> PostgresQuery {
                "SELECT count(*) FROM pg_prepared_statements WHERE statement = \(sql)"
            }
            try await client.withConnection { connection in
                let outcomes = try await connection.pipeline(groups: [
                    // The same statement twice in a group: prepared once.
                    ["INSERT INTO items VALUES (\(Int32(1)))", "INSERT INTO items VALUES (\(Int32(2)))"],
                    // A group's preparations are its own (a preparation skipped in one cannot serve another).
                    ["SELECT 1 / \(Int32(0))", "SELECT count(*) FROM items WHERE id > \(Int32(0))"],
                ])
                #expect((try? outcomes[0].get()) != nil)
                #expect((try? outcomes[1].get()) == nil)
                #expect(try await connection.query(prepared(insert)).scalar(Int.self) == 1)
                #expect(try await connection.query(prepared(skipped)).scalar(Int.self) == 0)
                // The skipped one is prepared when it runs next; the prepared one is used, not prepared again.
                let again = try await connection.pipeline([
                    "INSERT INTO items VALUES (\(Int32(3)))", "SELECT count(*) FROM items WHERE id > \(Int32(0))",
                ])
                #expect(try again[1].scalar(Int.self) == 3)
                #expect(try await connection.query(prepared(insert)).scalar(Int.self) == 1)
                #expect(try await connection.query(prepared(skipped)).scalar(Int.self) == 1)
            }
        }
    }

    /// A prepared statement over an array is planned once per connection, not at every call: PostgreSQL's own
    /// choice (`plan_cache_mode = auto`) plans such a statement anew each time, since a plan made for the array at
    /// hand always looks cheaper than one made for any array.
    @Test(arguments: [true, false]) func aPreparedStatementIsPlannedOnce(genericPlans: Bool) async throws {
        try await withTestClient(configure: { $0.genericPlans = genericPlans }) { client in
            try await client.execute("CREATE TABLE items (id int PRIMARY KEY)")
            try await client.execute("INSERT INTO items SELECT generate_series(1, 1000)")
            try await client.execute("ANALYZE items")
            let lookup = "SELECT count(*) FROM items WHERE id = ANY($1::int4[])"
            try await client.withConnection { connection in
                for size in 1...8 {
                    let ids = (1...Int32(size)).map { $0 * 7 }
                    let count = try await connection.query("SELECT count(*) FROM items WHERE id = ANY(\(ids)::int4[])")
                    #expect(try count.scalar(Int.self) == size)
                }
                let plans = try await connection.query(
                    "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = \(lookup)")
                let (generic, custom) = try plans[0].decode((Int64, Int64).self)
                if genericPlans {
                    #expect(custom == 0 && generic == 8)
                } else {
                    #expect(custom == 8 && generic == 0)  // PostgreSQL's default: planned for each call's values
                }
            }
        }
    }

    @Test(arguments: [true, false]) func aLargePipelineDoesNotDeadlock(polled: Bool) async throws {
        try await withTestClient(polled: polled) { client in
            let blob = [UInt8](repeating: 0xAB, count: 64 * 1024)
            let queries: [PostgresQuery] = (0..<200).map { _ in "SELECT \(blob)" }
            let results = try await client.pipeline(queries)
            #expect(results.count == 200)
            #expect(try results[199].scalar([UInt8].self) == blob)
        }
    }

    @Test(arguments: [true, false]) func groupsFailAloneAndOneCommitsWhileTheNextBegins(polled: Bool) async throws {
        try await withTestClient(polled: polled) { client in
            try await client.execute("CREATE TABLE items (id int PRIMARY KEY)")
            try await client.withConnection { connection in
                // Outside a transaction each group is its own implicit transaction: the failing one leaves
                // nothing, the groups after it run.
                let outcomes = try await connection.pipeline(groups: [
                    ["INSERT INTO items VALUES (1)"],
                    ["INSERT INTO items VALUES (2)", "INSERT INTO items VALUES (2)", "INSERT INTO items VALUES (3)"],
                    ["INSERT INTO items VALUES (4)", "SELECT count(*) FROM items"],
                ])
                #expect(outcomes.count == 3)
                #expect((try? outcomes[0].get()) != nil)
                if case .failure(let error) = outcomes[1] { #expect(error.code == .uniqueViolation) } else {
                    Issue.record("the group with a duplicate key succeeded")
                }
                #expect(try outcomes[2].get()[1].scalar(Int.self) == 2)

                // A transaction's writes and COMMIT, then the next transaction's BEGIN and a read, in one round
                // trip: the read runs after the COMMIT and sees it.
                try await connection.execute("BEGIN")
                try await connection.execute("INSERT INTO items VALUES (10)")
                let chained = try await connection.pipeline(groups: [
                    ["INSERT INTO items VALUES (11)", "COMMIT"],
                    ["BEGIN", "SELECT count(*) FROM items WHERE id >= 10"],
                ])
                #expect(try chained[0].get()[1].commandTag == "COMMIT")
                #expect(try chained[1].get()[1].scalar(Int.self) == 2)
                try await connection.execute("COMMIT")

                // When the first transaction fails, the next group fails with it (the transaction is aborted
                // until a ROLLBACK) and nothing of either remains.
                try await connection.execute("BEGIN")
                let failed = try await connection.pipeline(groups: [
                    ["INSERT INTO items VALUES (20)", "INSERT INTO items VALUES (1)", "COMMIT"],
                    ["BEGIN", "INSERT INTO items VALUES (21)"],
                ])
                #expect((try? failed[0].get()) == nil)
                #expect((try? failed[1].get()) == nil)
                try await connection.execute("ROLLBACK")
                #expect(try await connection.query("SELECT count(*) FROM items WHERE id >= 20").scalar(Int.self) == 0)
            }
        }
    }
}
