import Testing

@testable import KindredPostgres

/// The pool's bookkeeping without a database: connections are stand-ins, waiters are real continuations of
/// tasks that report what they were handed.
@Suite struct PoolStateMachineTests {
    final class Connection: Sendable {
        let id: Int
        init(_ id: Int) { self.id = id }
    }

    typealias Machine = PoolStateMachine<Connection>

    /// A task suspended on a continuation the test gives to the machine; `outcome` says how it was resumed.
    struct Waiter {
        let continuation: CheckedContinuation<Machine.Lease, any Error>
        let outcome: Task<String, Never>
    }

    static func waiter() async -> Waiter {
        let (stream, source) = AsyncStream<CheckedContinuation<Machine.Lease, any Error>>.makeStream()
        let outcome = Task { () -> String in
            do {
                switch try await withCheckedThrowingContinuation({ source.yield($0) }) {
                case .openSlot: return "openSlot"
                case .connection(let connection, _): return "connection \(connection.id)"
                }
            } catch let error as PostgresError {
                return "\(error.code)"
            } catch {
                return "\(error)"
            }
        }
        var iterator = stream.makeAsyncIterator()
        return Waiter(continuation: await iterator.next()!, outcome: outcome)
    }

    /// Performs the actions as the client does; returns the ids of the connections to close.
    @discardableResult
    static func perform(_ actions: Machine.Actions) -> [Int] {
        for (continuation, result) in actions.resume { continuation.resume(with: result) }
        for continuation in actions.shutdownComplete { continuation.resume() }
        return actions.close.map(\.id)
    }

    static func describe(_ result: Machine.AcquireResult) -> String {
        switch result {
        case .lease(.openSlot): "openSlot"
        case .lease(.connection(let connection, _)): "connection \(connection.id)"
        case .failed(let error): "\(error.code)"
        case .waiting: "waiting"
        }
    }

    static let now = ContinuousClock.now

    @Test func slotsUpToTheLimitThenWaiters() async {
        var machine = Machine(maxConnections: 2, idleTimeout: nil)
        let unused = await Self.waiter()
        #expect(Self.describe(machine.acquire(id: machine.makeID(), continuation: unused.continuation)) == "openSlot")
        #expect(Self.describe(machine.acquire(id: machine.makeID(), continuation: unused.continuation)) == "openSlot")
        let third = await Self.waiter()
        #expect(Self.describe(machine.acquire(id: machine.makeID(), continuation: third.continuation)) == "waiting")
        #expect(machine.statistics.opening == 2)
        #expect(machine.statistics.waiting == 1)
        machine.opened()
        #expect(machine.statistics.inUse == 1)
        // The opened connection comes back: the waiter gets it, without a trip through the idle list.
        #expect(Self.perform(machine.release(Connection(1), reusable: true, now: Self.now)) == [])
        #expect(await third.outcome.value == "connection 1")
        #expect(machine.statistics.idle == 0)
        unused.continuation.resume(throwing: CancellationError())
    }

    @Test func brokenConnectionFreesItsSlotForTheNextWaiter() async {
        var machine = Machine(maxConnections: 1, idleTimeout: nil)
        let first = await Self.waiter()
        _ = machine.acquire(id: machine.makeID(), continuation: first.continuation)
        machine.opened()
        let second = await Self.waiter()
        #expect(Self.describe(machine.acquire(id: machine.makeID(), continuation: second.continuation)) == "waiting")
        #expect(Self.perform(machine.release(Connection(1), reusable: false, now: Self.now)) == [1])
        #expect(await second.outcome.value == "openSlot")
        #expect(machine.statistics.totalClosed == 1)
        first.continuation.resume(throwing: CancellationError())
    }

    @Test func failedOpenHandsTheSlotOn() async {
        var machine = Machine(maxConnections: 1, idleTimeout: nil)
        let first = await Self.waiter()
        _ = machine.acquire(id: machine.makeID(), continuation: first.continuation)
        let second = await Self.waiter()
        _ = machine.acquire(id: machine.makeID(), continuation: second.continuation)
        Self.perform(machine.openFailed())
        #expect(await second.outcome.value == "openSlot")
        #expect(machine.statistics.opening == 1)
        first.continuation.resume(throwing: CancellationError())
    }

    @Test func idleConnectionsAreReusedMostRecentFirstAndPrunedWhenOld() async {
        var machine = Machine(maxConnections: 3, idleTimeout: .seconds(60))
        let unused = await Self.waiter()
        for _ in 0..<3 {
            _ = machine.acquire(id: machine.makeID(), continuation: unused.continuation)
            machine.opened()
        }
        Self.perform(machine.release(Connection(1), reusable: true, now: Self.now))
        Self.perform(machine.release(Connection(2), reusable: true, now: Self.now + .seconds(30)))
        #expect(machine.statistics.idle == 2)
        // Connection 1 has been idle for 70 s when connection 3 comes back 70 s later: it is closed.
        #expect(Self.perform(machine.release(Connection(3), reusable: true, now: Self.now + .seconds(70))) == [1])
        #expect(Self.describe(machine.acquire(id: machine.makeID(), continuation: unused.continuation)) == "connection 3")
        #expect(Self.describe(machine.acquire(id: machine.makeID(), continuation: unused.continuation)) == "connection 2")
        unused.continuation.resume(throwing: CancellationError())
    }

    @Test func timedOutWaiterFailsAndIsCounted() async {
        var machine = Machine(maxConnections: 1, idleTimeout: nil)
        let unused = await Self.waiter()
        _ = machine.acquire(id: machine.makeID(), continuation: unused.continuation)
        let waiting = await Self.waiter()
        let id = machine.makeID()
        _ = machine.acquire(id: id, continuation: waiting.continuation)
        Self.perform(machine.removeWaiter(id: id, error: PostgresError(code: .poolTimeout, reason: "timeout")))
        #expect(await waiting.outcome.value == "poolTimeout")
        #expect(machine.statistics.acquireTimeouts == 1)
        #expect(machine.statistics.waiting == 0)
        // Removing it again (a timer racing the hand-over) does nothing.
        #expect(machine.removeWaiter(id: id, error: PostgresError(code: .poolTimeout, reason: "timeout")).resume.isEmpty)
        unused.continuation.resume(throwing: CancellationError())
    }

    @Test func shutdownFailsWaitersClosesIdleAndWaitsForLeases() async {
        var machine = Machine(maxConnections: 2, idleTimeout: nil)
        let unused = await Self.waiter()
        for _ in 0..<2 {
            _ = machine.acquire(id: machine.makeID(), continuation: unused.continuation)
            machine.opened()
        }
        Self.perform(machine.release(Connection(1), reusable: true, now: Self.now))
        let waiting = await Self.waiter()
        // Connection 1 is idle, so this acquire takes it; a third caller has to wait.
        _ = machine.acquire(id: machine.makeID(), continuation: unused.continuation)
        _ = machine.acquire(id: machine.makeID(), continuation: waiting.continuation)

        let (stream, source) = AsyncStream<CheckedContinuation<Void, Never>>.makeStream()
        let stopped = Task { await withCheckedContinuation { source.yield($0) } }
        var iterator = stream.makeAsyncIterator()
        let continuation = await iterator.next()!
        #expect(Self.perform(machine.shutdown(continuation)) == [])
        #expect(await waiting.outcome.value == "poolShutdown")
        #expect(!machine.isRunning)
        #expect(Self.describe(machine.acquire(id: machine.makeID(), continuation: unused.continuation)) == "poolShutdown")
        #expect(Self.perform(machine.release(Connection(1), reusable: true, now: Self.now)) == [1])
        #expect(Self.perform(machine.release(Connection(2), reusable: true, now: Self.now)) == [2])
        await stopped.value
        #expect(machine.statistics.inUse == 0)
        unused.continuation.resume(throwing: CancellationError())
    }
}
