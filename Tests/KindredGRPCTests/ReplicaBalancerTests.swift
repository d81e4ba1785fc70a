@testable import KindredGRPC
import KindredGRPCServices
import KindredProto
import Logging
import NIOCore
import Synchronization
import Testing

/// Echo that answers with the name of its server (after `delayMs`), and counts the calls it started. With
/// `holds` set it answers no call (until the call is cut), however loaded the machine running the test is.
private final class NamedEcho: GRPCService, Sendable {
    let name: String
    let started = Atomic<Int>(0)
    let holds = Atomic<Bool>(false)

    init(name: String) {
        self.name = name
    }

    func register(in router: inout GRPCRouter) {
        router.unary(V1.InteropService.Method.echo) { request, _ in
            self.started.add(1, ordering: .relaxed)
            let held = self.holds.load(ordering: .relaxed)
            try await Task.sleep(for: .milliseconds(held ? 120_000 : Int(request.delayMs)))
            var response = V1.EchoResponse()
            response.message = self.name
            return response
        }
    }
}

/// A replica: a real server on loopback with the health service (as every Kindred server has), which can be
/// stopped (GOAWAY and drain, or no grace at all) and started again on its port.
private final class Replica: Sendable {
    let name: String
    let echo: NamedEcho
    let server: Mutex<GRPCServer?> = Mutex(nil)
    let port: Mutex<Int> = Mutex(0)

    init(_ name: String) {
        self.name = name
        self.echo = NamedEcho(name: name)
    }

    func start(port: Int = 0) async throws {
        var configuration = GRPCServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = port
        let health = HealthService()
        health.setStatus(true)
        let server = GRPCServer(configuration: configuration, services: [self.echo, health], logger: Logger(label: "t"))
        let address = try await server.start()
        self.server.withLock { $0 = server }
        self.port.withLock { $0 = address.port! }
    }

    func stop(grace: Duration) async {
        guard let server = self.server.withLock({ $0.take() }) else { return }
        await server.shutdown(grace: grace)
    }

    var endpoint: GRPCEndpoint { GRPCEndpoint(host: "127.0.0.1", port: self.port.withLock { $0 }) }
}

private func balancedClient(_ replicas: [Replica]) -> GRPCClient {
    var configuration = GRPCClientConfiguration(replicas: replicas.map(\.endpoint))
    configuration.healthCheckInterval = .milliseconds(200)
    configuration.backoff.initial = .milliseconds(100)
    configuration.backoff.maximum = .milliseconds(200)
    configuration.connectTimeout = .seconds(2)
    return GRPCClient(configuration: configuration, logger: Logger(label: "t"))
}


/// Waits, polling, until `condition` holds (generous deadline: the machine may be loaded).
private func waitUntil(_ seconds: Double = 20, _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return await condition()
}

@Suite("A client over several replicas: balance, health, GOAWAY drain, retries")
struct ReplicaBalancerTests {
    @Test("pick-two takes the less loaded of the two it draws")
    func pickTwo() {
        #expect(ReplicaBalancer.pickTwo(loads: []) == nil)
        #expect(ReplicaBalancer.pickTwo(loads: [7]) == 0)
        // Of two, always the smaller load, whichever is drawn first.
        for _ in 0..<50 { #expect(ReplicaBalancer.pickTwo(loads: [5, 1]) == 1) }
        // Of three, the most loaded is never picked (it loses to whichever other is drawn).
        for _ in 0..<200 { #expect(ReplicaBalancer.pickTwo(loads: [0, 9, 0]) != 1) }
    }

    @Test("calls spread over both replicas; concurrent calls go to the less loaded one")
    func balance() async throws {
        let a = Replica("a")
        let b = Replica("b")
        try await a.start()
        try await b.start()
        let client = balancedClient([a, b])
        var seen: [String: Int] = [:]
        for index in 0..<60 { seen[try await client.unary(V1.InteropService.Method.echo, echo("\(index)")).message, default: 0] += 1 }
        #expect(seen["a", default: 0] >= 10 && seen["b", default: 0] >= 10, "\(seen)")
        // Ten slow calls held on the replicas: pick-two sends each to the one with fewer in flight, so they split
        // evenly (round-robin would too, but random would not, and one replica would not).
        let slow = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<10 { group.addTask { try await client.unary(V1.InteropService.Method.echo, echo("slow", delayMs: 1500)).message } }
            return try await group.reduce(into: [String: Int]()) { $0[$1, default: 0] += 1 }
        }
        #expect(slow["a", default: 0] >= 4 && slow["b", default: 0] >= 4, "\(slow)")
        await client.close()
        await a.stop(grace: .seconds(1))
        await b.stop(grace: .seconds(1))
    }

    @Test("a replica that is down is skipped (connection refused: retried on the other), and back once it serves")
    func downAndBack() async throws {
        let a = Replica("a")
        let b = Replica("b")
        try await a.start()
        try await b.start()
        let port = b.endpoint.port
        await b.stop(grace: .zero)
        let client = balancedClient([a, b])
        // Every call succeeds, even those first sent to b: nothing was sent there, so they went to a.
        for index in 0..<20 {
            #expect(try await client.unary(V1.InteropService.Method.echo, echo("\(index)")).message == "a")
        }
        #expect(await waitUntil { client.replicaStates.map(\.up) == [true, false] })
        try await b.start(port: port)
        #expect(await waitUntil { client.replicaStates.map(\.up) == [true, true] })
        #expect(await waitUntil {
            (try? await client.unary(V1.InteropService.Method.echo, echo("x")).message) == "b"
        })
        await client.close()
        await a.stop(grace: .seconds(1))
        await b.stop(grace: .seconds(1))
    }

    @Test("GOAWAY drains a replica: its call in flight finishes there, new calls go to the other")
    func goAwayDrains() async throws {
        let a = Replica("a")
        let b = Replica("b")
        try await a.start()
        try await b.start()
        let client = balancedClient([a, b])
        // Slow calls on both replicas, then b shuts down gracefully (GOAWAY, 10 s grace).
        let inFlight = Task {
            try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<4 { group.addTask { try await client.unary(V1.InteropService.Method.echo, echo("slow", delayMs: 1500)).message } }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
        }
        #expect(await waitUntil { b.echo.started.load(ordering: .relaxed) >= 1 })
        let stopping = Task { await b.stop(grace: .seconds(10)) }
        #expect(await waitUntil { client.replicaStates.map(\.up) == [true, false] })
        // No call fails meanwhile, and none goes to b.
        let startedOnB = b.echo.started.load(ordering: .relaxed)
        for index in 0..<20 {
            #expect(try await client.unary(V1.InteropService.Method.echo, echo("\(index)")).message == "a")
        }
        #expect(b.echo.started.load(ordering: .relaxed) == startedOnB)
        let answers = try await inFlight.value
        #expect(answers.count == 4 && answers.contains("b"))
        await stopping.value
        await client.close()
        await a.stop(grace: .seconds(1))
    }

    @Test("a call cut by a replica's death mid-call is retried elsewhere when idempotent, and fails otherwise")
    func interruptedCalls() async throws {
        let a = Replica("a")
        let b = Replica("b")
        try await a.start()
        try await b.start()
        let client = balancedClient([a, b])
        // Calls on both replicas, those on b held there; then b stops without grace: its calls are cut.
        b.echo.holds.store(true, ordering: .relaxed)
        func slowCalls(idempotent: Bool) -> Task<[Result<String, RPCError>], Never> {
            Task {
                await withTaskGroup(of: Result<String, RPCError>.self) { group in
                    for _ in 0..<6 {
                        group.addTask {
                            do {
                                return .success(
                                    try await client.unary(
                                        V1.InteropService.Method.echo, echo("slow", delayMs: 2000),
                                        options: CallOptions(idempotent: idempotent)
                                    ).message)
                            } catch let error as RPCError {
                                return .failure(error)
                            } catch {
                                return .failure(RPCError(.unknown, "\(error)"))
                            }
                        }
                    }
                    return await group.reduce(into: []) { $0.append($1) }
                }
            }
        }
        let idempotent = slowCalls(idempotent: true)
        #expect(await waitUntil { b.echo.started.load(ordering: .relaxed) >= 2 && a.echo.started.load(ordering: .relaxed) >= 2 })
        await b.stop(grace: .zero)
        let results = await idempotent.value
        #expect(results.allSatisfy { (try? $0.get()) == "a" }, "\(results)")

        try await b.start(port: b.endpoint.port)
        #expect(await waitUntil { client.replicaStates.map(\.up) == [true, true] })
        let before = b.echo.started.load(ordering: .relaxed)
        let writes = slowCalls(idempotent: false)
        #expect(await waitUntil { b.echo.started.load(ordering: .relaxed) > before })
        await b.stop(grace: .zero)
        let outcomes = await writes.value
        // Calls b had started may have acted: they fail (UNAVAILABLE), not run twice; a's succeed.
        #expect(outcomes.contains { if case .failure(let error) = $0 { error.code == .unavailable } else { false } }, "\(outcomes)")
        #expect(outcomes.allSatisfy { if case .success(let name) = $0 { name == "a" } else { true } })
        await client.close()
        await a.stop(grace: .seconds(1))
    }

    @Test("one address keeps the single pool (no balancer, no health checks)")
    func singleAddress() async throws {
        let a = Replica("a")
        try await a.start()
        let client = GRPCClient(
            configuration: GRPCClientConfiguration(replicas: [a.endpoint]), logger: Logger(label: "t"))
        #expect(client.configuration.replicas.isEmpty)
        #expect(try await client.unary(V1.InteropService.Method.echo, echo("x")).message == "a")
        #expect(client.replicaStates.count == 1)
        await client.close()
        await a.stop(grace: .seconds(1))
    }
}
