// What one statement costs the client: `kindred-postgres-bench URL [STATEMENTS] [TASKS...]` runs, for each number
// of tasks (default 1 and 8), STATEMENTS (default 20,000) prepared one-row SELECTs per task through a
// `PostgresClient` (as a service runs its statements), after a warm-up that prepares the statement on every
// connection, and prints statements/s and the process's CPU time per statement (getrusage). Tests/Benchmarks/
// postgres-client.sh runs it beside pgbench (C, libpq, one thread polling every connection) on the same statement.
import Foundation
import KindredPostgres
import Logging

func cpuMicroseconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let seconds = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
    return seconds * 1e6 + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
}

func run(_ client: PostgresClient, tasks: Int, statements: Int) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<tasks {
            group.addTask {
                for i in 0..<statements { _ = try await client.query("SELECT \(Int64(i))::int8 + 1") }
            }
        }
        try await group.waitForAll()
    }
}

let arguments = CommandLine.arguments.dropFirst()
guard let url = arguments.first else {
    print("usage: kindred-postgres-bench URL [STATEMENTS] [TASKS...]")
    exit(2)
}
let statements = arguments.dropFirst().first.flatMap { Int($0) } ?? 20_000
let taskCounts = arguments.dropFirst(2).compactMap { Int($0) }
var logger = Logger(label: "kindred-postgres-bench")
logger.logLevel = .error
var pool = PostgresClient.PoolConfiguration()
pool.maxConnections = max(taskCounts.max() ?? 8, 8)
let client = PostgresClient(configuration: try PostgresConfiguration(url), pool: pool, logger: logger)
for tasks in taskCounts.isEmpty ? [1, 8] : taskCounts {
    try await run(client, tasks: tasks, statements: 200)
    let (cpu, start) = (cpuMicroseconds(), ContinuousClock.now)
    try await run(client, tasks: tasks, statements: statements)
    let elapsed = (ContinuousClock.now - start) / .seconds(1)
    let count = Double(tasks * statements)
    print(String(
        format: "kindred %d in flight: %.0f statements/s, client CPU %.1f µs/statement", tasks, count / elapsed,
        (cpuMicroseconds() - cpu) / count))
}
await client.shutdown()
