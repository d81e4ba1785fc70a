import KindredPostgresTesting
import Logging
import NIOPosix
import Testing

@testable import KindredPostgres

/// Every test gets a fresh database on the process-wide test server.
/// - Parameter polled: false: the client has no poller, every statement waits on its thread pool.
func withTestClient<T>(
    polled: Bool = true,
    pool: PostgresClient.PoolConfiguration = PostgresClient.PoolConfiguration(),
    configure: (inout PostgresConfiguration) -> Void = { _ in },
    _ body: (PostgresClient) async throws -> T
) async throws -> T {
    let server = try await TestPostgres.shared()
    var configuration = try await server.createDatabase()
    configure(&configuration)
    let client = PostgresClient(configuration: configuration, pool: pool, logger: testLogger, usesPoller: polled)
    do {
        let value = try await body(client)
        await client.shutdown()
        return value
    } catch {
        await client.shutdown()
        throw error
    }
}

let testLogger: Logger = {
    var logger = Logger(label: "kindred.postgres.tests")
    logger.logLevel = .warning
    return logger
}()

/// Runs `statement` (one that sleeps 30 s) in a task, cancels the task 200 ms later, and expects it to end with
/// ``PostgresError/Code/cancelled`` long before the sleep would have: the cancel request reached the server.
func expectCancellingTheTaskCancels(
    _ statement: @escaping @Sendable () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation
) async throws {
    let start = ContinuousClock.now
    let task = Task { try await statement() }
    try await Task.sleep(for: .milliseconds(200))
    task.cancel()
    let error = await #expect(throws: PostgresError.self, sourceLocation: sourceLocation) { try await task.value }
    #expect(error?.code == .cancelled, sourceLocation: sourceLocation)
    // Far below the 30 s sleep; generous for loaded CI machines.
    #expect(ContinuousClock.now - start < .seconds(15), sourceLocation: sourceLocation)
}

/// Terminates a backend from another session and waits until it is gone. The session has a thread of its own: on the
/// process-wide pool it could wait for seconds behind other tests' blocking calls, past the statement a test kills.
func terminate(_ pid: Int32, using client: PostgresClient) async throws {
    let thread = NIOThreadPool(numberOfThreads: 1)
    thread.start()
    defer { thread.shutdownGracefully { _ in } }
    let admin = try await PostgresConnection.connect(
        configuration: client.configuration, threadPool: thread, logger: testLogger)
    defer { admin.close() }
    #expect(try await admin.query("SELECT pg_terminate_backend(\(pid))").scalar(Bool.self))
    for _ in 0..<200 {
        let alive = try await admin.query("SELECT count(*) FROM pg_stat_activity WHERE pid = \(pid)")
        if try alive.scalar(Int.self) == 0 { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("backend \(pid) did not go away")
}
