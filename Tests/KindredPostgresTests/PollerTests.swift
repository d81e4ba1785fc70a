import Foundation
import Testing

@testable import KindredPostgres

/// Pipelines, and statements a connection has prepared already, are sent from the caller's thread and their results
/// read by the client's poller (`PostgresPoller`): the tests of single statements run each once to prepare it, then
/// again through the poller, and check what the thread pool's path gives — rows, errors, cancellation, a lost
/// connection, a changed table.
@Suite struct PollerTests {
    @Test func aPreparedStatementIsAnsweredThroughThePoller() async throws {
        try await withTestClient { client in
            try await client.withConnection { (connection: PostgresConnection) async throws in
                #expect(try await connection.query("SELECT \(Int64(1))::int8 + 1").scalar(Int64.self) == 2)
                #expect(connection.polledStatements == 0, "the first run prepares it on the thread pool")
                for value in Int64(2)...Int64(50) {
                    #expect(try await connection.query("SELECT \(value)::int8 + 1").scalar(Int64.self) == value + 1)
                }
                #expect(connection.polledStatements == 49)
            }
        }
    }

    /// Operators find the poller in top and perf by its thread's name.
    @Test func thePollerThreadIsNamed() async throws {
        try await withTestClient { _ in
            let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")
            let names = tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
            #expect(names.contains("PG-poll\n"))
        }
    }

    @Test func aLargeResultAndALargeParameterArriveWhole() async throws {
        try await withTestClient { client in
            try await client.withConnection { (connection: PostgresConnection) async throws in
                // 8 MB each way: many socket reads for the result, a send that does not fit the socket at once.
                let parameter = [UInt8](repeating: 7, count: 8 << 20)
                for _ in 0..<2 {
                    let row = try await connection.query(
                        "SELECT length(\(parameter)::bytea), repeat('x', \(Int64(8 << 20))::int)")[0]
                    #expect(try row.decode(Int32.self, at: 0) == 8 << 20)
                    #expect(try row.decode(String.self, at: 1).utf8.count == 8 << 20)
                }
                #expect(connection.polledStatements == 1)
            }
        }
    }

    @Test func errorsCancellationAndAChangedTableAsOnThePool() async throws {
        try await withTestClient { client in
            try await client.withConnection { (connection: PostgresConnection) async throws in
                // A server error: the connection stays usable.
                _ = try await connection.query("SELECT 1 / \(Int64(1))::int8")
                let error = await #expect(throws: PostgresError.self) {
                    _ = try await connection.query("SELECT 1 / \(Int64(0))::int8")
                }
                #expect(error?.sqlState == "22012")
                // Cancelling the waiting task cancels the statement.
                _ = try await connection.query("SELECT pg_sleep(\(0.0))")
                try await expectCancellingTheTaskCancels { _ = try await connection.query("SELECT pg_sleep(\(30.0))") }
                // A table changed under a prepared statement: prepared again, the new columns read.
                try await connection.execute("CREATE TABLE changing (a int)")
                try await connection.execute("INSERT INTO changing VALUES (1)")
                for _ in 0..<2 { _ = try await connection.query("SELECT * FROM changing WHERE a = \(Int32(1))") }
                try await connection.execute("ALTER TABLE changing ADD COLUMN b int DEFAULT 2")
                let row = try await connection.query("SELECT * FROM changing WHERE a = \(Int32(1))")[0]
                let (a, b) = try row.decode((Int32, Int32).self)
                #expect(a == 1 && b == 2)
                #expect(connection.polledStatements >= 3)
            }
        }
    }

    @Test func aConnectionKilledDuringAPolledStatementReportsConnectionLost() async throws {
        try await withTestClient { client in
            let oldPID = try await client.withConnection { (connection: PostgresConnection) async throws in
                _ = try await connection.query("SELECT pg_sleep(\(0.0))")
                let sleeping = Task { try await connection.query("SELECT pg_sleep(\(30.0))") }
                try await Task.sleep(for: .milliseconds(200))
                try await terminate(connection.backendPID, using: client)
                let error = await #expect(throws: PostgresError.self) { _ = try await sleeping.value }
                #expect(error?.code == .connectionLost)
                #expect(connection.isClosed)
                return connection.backendPID
            }
            #expect(try await client.query("SELECT pg_backend_pid()").scalar(Int32.self) != oldPID)
        }
    }

    @Test func pipelinesAndTransactionsAreAnsweredThroughThePoller() async throws {
        try await withTestClient { client in
            try await client.execute("CREATE TABLE items (id int PRIMARY KEY)")
            try await client.withConnection { (connection: PostgresConnection) async throws in
                // First runs too: a pipeline prepares its new statements in the pipeline itself.
                let results = try await connection.pipeline([
                    "INSERT INTO items VALUES (\(Int32(1)))", "SELECT count(*) FROM items",
                ])
                #expect(try results[1].scalar(Int.self) == 1)
                #expect(connection.polledPipelines == 1)
            }
            // A transaction's BEGIN travels with its first statement, its COMMIT with its last: two pipelines.
            try await client.withTransaction { transaction in
                try await transaction.execute("INSERT INTO items VALUES (\(Int32(2)))")
                _ = try await transaction.commit(after: ["INSERT INTO items VALUES (\(Int32(3)))"])
                #expect(transaction.connection.polledPipelines >= 2)
            }
            #expect(try await client.query("SELECT count(*) FROM items").scalar(Int.self) == 3)
        }
    }

    @Test func aPolledPipelineIsCancelledOrLostAsOnThePool() async throws {
        try await withTestClient { client in
            try await client.withConnection { (connection: PostgresConnection) async throws in
                try await expectCancellingTheTaskCancels {
                    _ = try await connection.pipeline(["SELECT 1", "SELECT pg_sleep(\(30.0))"])
                }
                #expect(try await connection.pipeline(["SELECT \(Int64(4))"])[0].scalar(Int64.self) == 4)
                #expect(connection.polledPipelines == 2)

                let lost = Task { try await connection.pipeline(["SELECT 1", "SELECT pg_sleep(\(30.0))"]) }
                try await Task.sleep(for: .milliseconds(200))
                try await terminate(connection.backendPID, using: client)
                let error = await #expect(throws: PostgresError.self) { _ = try await lost.value }
                #expect(error?.code == .connectionLost)
                #expect(connection.isClosed)
            }
        }
    }
}
