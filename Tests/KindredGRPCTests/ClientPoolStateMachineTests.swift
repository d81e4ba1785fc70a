import NIOCore
import Testing

@testable import KindredGRPC

/// The client pool's decisions without I/O: connections and waiting calls are names, events are fed by hand.
@Suite struct ClientPoolStateMachineTests {
    typealias Machine = ClientPoolStateMachine<String, String>

    static let now = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    static func machine(preferred: Int = 1, max: Int = 2, waiting: Int = 10) -> Machine {
        Machine(limits: .init(preferredConnections: preferred, maxConnections: max, maxWaiting: waiting), authority: "chat:9000")
    }

    /// "lease c1" / "waiting" / "failed RESOURCE_EXHAUSTED", then the actions, e.g. "connect 2; a→c1; b→UNAVAILABLE".
    static func describe(_ result: (Machine.AcquireResult, Machine.Actions)) -> String {
        let head: String
        switch result.0 {
        case .lease(let lease): head = "lease \(lease.connection)"
        case .waiting: head = "waiting"
        case .failed(let error): head = "failed \(error.code)"
        }
        let tail = Self.describe(result.1)
        return tail.isEmpty ? head : "\(head); \(tail)"
    }

    static func describe(_ actions: Machine.Actions) -> String {
        var parts = actions.connect.map { "connect \($0)" }
        for (waiter, result) in actions.resume {
            switch result {
            case .success(let lease): parts.append("\(waiter)→\(lease.connection)")
            case .failure(let error): parts.append("\(waiter)→\(error.code)")
            }
        }
        parts += actions.close.map { "close \($0)" }
        return parts.joined(separator: "; ")
    }

    static func acquire(_ machine: inout Machine, _ name: String, now: NIODeadline = Self.now) -> String {
        Self.describe(machine.acquire(id: name.hashValue, waiter: name, now: now))
    }

    @Test func aCallWaitsForTheFirstConnectionUntilItsSettingsArrive() {
        var machine = Self.machine()
        #expect(Self.acquire(&machine, "a") == "waiting; connect 1")
        #expect(Self.acquire(&machine, "b") == "waiting")
        let actions = machine.connected(entry: 1, connection: "c1", limit: 4, now: Self.now)
        #expect(Self.describe(actions) == "a→c1; b→c1")
        #expect(machine.streams.map(\.open) == [2])
    }

    @Test func fullConnectionsOpenAnotherOneAtATimeUpToTheMaximum() {
        var machine = Self.machine(preferred: 1, max: 2)
        _ = Self.acquire(&machine, "a")
        _ = machine.connected(entry: 1, connection: "c1", limit: 1, now: Self.now)
        // c1 is full: a second connection opens and the call waits for it; a third call waits too (one
        // connection opens at a time beyond the preferred count).
        #expect(Self.acquire(&machine, "b") == "waiting; connect 2")
        #expect(Self.acquire(&machine, "c") == "waiting")
        #expect(Self.describe(machine.connected(entry: 2, connection: "c2", limit: 1, now: Self.now)) == "b→c2")
        // At the maximum: c waits for a slot, which it gets when a call on c1 ends.
        #expect(Self.acquire(&machine, "d") == "waiting")
        #expect(Self.describe(machine.released(entry: 1, now: Self.now)) == "c→c1")
        #expect(Self.describe(machine.released(entry: 2, now: Self.now)) == "d→c2")
        #expect(machine.waitingCount == 0)
    }

    @Test func preferredConnectionsOpenWhileCallsArrive() {
        var machine = Self.machine(preferred: 2, max: 4)
        #expect(Self.acquire(&machine, "a") == "waiting; connect 1")
        #expect(Self.acquire(&machine, "b") == "waiting; connect 2")
        #expect(Self.acquire(&machine, "c") == "waiting")
        #expect(Self.describe(machine.connected(entry: 2, connection: "c2", limit: 100, now: Self.now)) == "a→c2; b→c2; c→c2")
        #expect(Self.describe(machine.connected(entry: 1, connection: "c1", limit: 100, now: Self.now)) == "")
        // Ready connections with room take calls in turn.
        #expect(Self.acquire(&machine, "d") == "lease c1")
        #expect(Self.acquire(&machine, "e") == "lease c2")
        #expect(Self.acquire(&machine, "f") == "lease c1")
    }

    @Test func freedSlotsGoToWaitingCallsInArrivalOrder() {
        var machine = Self.machine(preferred: 1, max: 1)
        _ = Self.acquire(&machine, "a")
        _ = machine.connected(entry: 1, connection: "c1", limit: 1, now: Self.now)
        #expect(Self.acquire(&machine, "b") == "waiting")
        #expect(Self.acquire(&machine, "c") == "waiting")
        #expect(Self.describe(machine.released(entry: 1, now: Self.now)) == "b→c1")
        #expect(Self.describe(machine.released(entry: 1, now: Self.now)) == "c→c1")
        #expect(Self.describe(machine.released(entry: 1, now: Self.now)) == "")
        #expect(Self.acquire(&machine, "d") == "lease c1")
    }

    @Test func aWaitingCallWhoseDeadlinePassesIsResourceExhausted() {
        var machine = Self.machine(preferred: 1, max: 1)
        _ = Self.acquire(&machine, "a")
        _ = machine.connected(entry: 1, connection: "c1", limit: 1, now: Self.now)
        _ = Self.acquire(&machine, "b")
        #expect(machine.stopWaiting(id: "b".hashValue) == "b")
        #expect(machine.stopWaiting(id: "b".hashValue) == nil)
        #expect(machine.deadlineError().code == .resourceExhausted)
        #expect(machine.deadlineError().message.contains("chat:9000"))
        // Its slot request is gone: the next free slot goes to nobody.
        #expect(Self.describe(machine.released(entry: 1, now: Self.now)) == "")
    }

    @Test func aCallWhoseDeadlinePassesWhileConnectingIsDeadlineExceeded() {
        var machine = Self.machine()
        #expect(Self.acquire(&machine, "a") == "waiting; connect 1")
        #expect(machine.stopWaiting(id: "a".hashValue) == "a")
        #expect(machine.deadlineError().code == .deadlineExceeded)
    }

    @Test func tooManyWaitingCallsFailAtOnce() {
        var machine = Self.machine(preferred: 1, max: 1, waiting: 2)
        _ = Self.acquire(&machine, "a")
        _ = machine.connected(entry: 1, connection: "c1", limit: 1, now: Self.now)
        #expect(Self.acquire(&machine, "b") == "waiting")
        #expect(Self.acquire(&machine, "c") == "waiting")
        #expect(Self.acquire(&machine, "d") == "failed RESOURCE_EXHAUSTED")
    }

    @Test func aFailedConnectFailsItsWaitersAndBacksOff() {
        var machine = Self.machine()
        _ = Self.acquire(&machine, "a")
        _ = Self.acquire(&machine, "b")
        let actions = machine.connectFailed(entry: 1, now: Self.now, retryDelay: .seconds(1))
        #expect(Self.describe(actions) == "a→UNAVAILABLE; b→UNAVAILABLE")
        #expect(machine.connectFailures == 1)
        // Fail fast during the backoff, then try again.
        #expect(Self.acquire(&machine, "c", now: Self.now + .milliseconds(500)) == "failed UNAVAILABLE")
        #expect(Self.acquire(&machine, "d", now: Self.now + .seconds(1)) == "waiting; connect 2")
        _ = machine.connected(entry: 2, connection: "c2", limit: 1, now: Self.now + .seconds(1))
        #expect(machine.connectFailures == 0)
    }

    @Test func aFailedExtraConnectLeavesCallsWaitingForTheReadyOne() {
        var machine = Self.machine(preferred: 1, max: 2)
        _ = Self.acquire(&machine, "a")
        _ = machine.connected(entry: 1, connection: "c1", limit: 1, now: Self.now)
        #expect(Self.acquire(&machine, "b") == "waiting; connect 2")
        #expect(Self.describe(machine.connectFailed(entry: 2, now: Self.now, retryDelay: .seconds(1))) == "")
        // No new attempt during the backoff; the slot on c1 serves b.
        #expect(Self.describe(machine.released(entry: 1, now: Self.now)) == "b→c1")
    }

    @Test func aDrainedConnectionTakesItsSlotsAlong() {
        var machine = Self.machine(preferred: 1, max: 1)
        _ = Self.acquire(&machine, "a")
        _ = machine.connected(entry: 1, connection: "c1", limit: 1, now: Self.now)
        #expect(Self.acquire(&machine, "b") == "waiting")
        // GOAWAY: b gets a new connection; a's call ends later on the old one, which changes nothing.
        #expect(Self.describe(machine.drained(entry: 1, now: Self.now)) == "connect 2")
        #expect(Self.describe(machine.released(entry: 1, now: Self.now)) == "")
        #expect(Self.describe(machine.connected(entry: 2, connection: "c2", limit: 1, now: Self.now)) == "b→c2")
    }

    @Test func thePeerChangingItsLimitMovesTheSlots() {
        var machine = Self.machine(preferred: 1, max: 1)
        _ = Self.acquire(&machine, "a")
        _ = machine.connected(entry: 1, connection: "c1", limit: 2, now: Self.now)
        #expect(Self.acquire(&machine, "b") == "lease c1")
        // Lowered below what is open: the open streams run on, nothing new starts until under the limit.
        #expect(Self.describe(machine.limitChanged(entry: 1, limit: 1, now: Self.now)) == "")
        #expect(Self.acquire(&machine, "c") == "waiting")
        #expect(Self.describe(machine.released(entry: 1, now: Self.now)) == "")
        #expect(Self.describe(machine.released(entry: 1, now: Self.now)) == "c→c1")
        #expect(Self.acquire(&machine, "d") == "waiting")
        #expect(Self.describe(machine.limitChanged(entry: 1, limit: 3, now: Self.now)) == "d→c1")
    }

    @Test func closingFailsWaitersAndClosesConnections() {
        var machine = Self.machine(preferred: 2, max: 2)
        _ = Self.acquire(&machine, "a")
        _ = machine.connected(entry: 1, connection: "c1", limit: 1, now: Self.now)
        #expect(Self.acquire(&machine, "b") == "waiting; connect 2")
        #expect(Self.describe(machine.close()) == "b→UNAVAILABLE; close c1")
        // The connection still opening is closed when it comes up.
        #expect(Self.describe(machine.connected(entry: 2, connection: "c2", limit: 1, now: Self.now)) == "close c2")
        #expect(Self.acquire(&machine, "c") == "failed UNAVAILABLE")
    }

    @Test(arguments: [
        // (limit, calls) → connections opened with preferred 1 and max 3
        (4, 4, 1), (4, 5, 2), (4, 10, 3), (4, 13, 3), (100, 13, 1),
    ])
    func connectionsOpenedForConcurrentCalls(limit: Int, calls: Int, connections: Int) {
        var machine = Self.machine(preferred: 1, max: 3, waiting: 100)
        var next = 1
        var pending: [Int] = []
        for index in 0..<calls {
            let (_, actions) = machine.acquire(id: index, waiter: "\(index)", now: Self.now)
            pending += actions.connect
        }
        while let entry = pending.first {
            pending.removeFirst()
            pending += machine.connected(entry: entry, connection: "c\(next)", limit: limit, now: Self.now).connect
            next += 1
        }
        #expect(machine.connectionCount == connections)
        #expect(machine.waitingCount == max(0, calls - connections * limit))
    }
}
