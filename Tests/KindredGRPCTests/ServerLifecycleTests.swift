import KindredGRPC
import KindredGRPCServices
import KindredInterop
import KindredProto
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import Testing

/// What happened, in order, across the lifecycle services of one run.
private final class EventLog: Sendable {
    private let events = Mutex<[String]>([])
    func append(_ event: String) { self.events.withLock { $0.append(event) } }
    var all: [String] { self.events.withLock { $0 } }
}

/// Echo that sleeps, then notes in `log` that its handler finished (on the server, before the answer leaves).
private struct SlowEchoService: GRPCService {
    let log: EventLog

    func register(in router: inout GRPCRouter) {
        router.unary(V1.InteropService.Method.echo) { request, _ in
            try await Task.sleep(for: .milliseconds(Int(request.delayMs)))
            self.log.append("call answered")
            var response = V1.EchoResponse()
            response.message = request.message
            return response
        }
    }
}

@Suite("ServerRunner on ServiceGroup: start order, drain, reverse stop")
struct ServerLifecycleTests {
    @Test("graceful shutdown: the call in flight finishes, then background loops stop, then the group returns")
    func gracefulShutdownDrainsThenStopsLoops() async throws {
        let log = EventLog()
        var configuration = GRPCServerConfiguration()
        configuration.port = 0
        var runner = ServerRunner(configuration: configuration, services: [SlowEchoService(log: log)])
        runner.admin = AdminServer.Configuration(host: "127.0.0.1", port: 0)
        runner.background = [
            BackgroundTask("relay") {
                log.append("relay started")
                while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
                log.append("relay stopped")
            }
        ]
        let (addresses, continuation) = AsyncStream.makeStream(of: Int.self)
        let group = runner.makeServiceGroup(logger: Logger(label: "test.lifecycle"), signals: []) { address in
            continuation.yield(address.port!)
        }
        let running = Task { try await group.run() }
        var iterator = addresses.makeAsyncIterator()
        let port = try #require(await iterator.next())
        #expect(runner.health.status(of: "") == true)

        let client = GRPCClient(configuration: GRPCClientConfiguration(host: "127.0.0.1", port: port), logger: Logger(label: "t"))
        // Slow enough that the check below sees it in flight even when a parallel run starves this task for a
        // while (400 ms was missed once, at the start of a full run).
        let call = Task { try await client.unary(V1.InteropService.Method.echo, echo("slow", delayMs: 3000)).message }
        // The call in flight on the server (a fixed 100 ms lost the race with a loaded machine's connect).
        #expect(await eventually { runner.metrics.activeCalls == 1 })
        await group.triggerGracefulShutdown()
        #expect(try await call.value == "slow")
        try await running.value
        #expect(runner.health.status(of: "") == false)
        // The relay ran while the server drained and stopped only after the last call was answered.
        #expect(log.all == ["relay started", "call answered", "relay stopped"])
        await client.close()
    }

    @Test("a background loop that ends by itself stops the server with an error")
    func backgroundLoopEndingStopsServer() async throws {
        var configuration = GRPCServerConfiguration()
        configuration.port = 0
        var runner = ServerRunner(configuration: configuration, services: [InteropService()])
        runner.background = [BackgroundTask("watcher") {}]
        let group = runner.makeServiceGroup(logger: Logger(label: "test.lifecycle"), signals: [])
        await #expect(throws: BackgroundTaskEnded.self) { try await group.run() }
    }

    @Test("a port in use fails the run instead of hanging")
    func portInUse() async throws {
        let first = try await Harness.start()
        var configuration = GRPCServerConfiguration()
        configuration.port = first.port
        let runner = ServerRunner(configuration: configuration, services: [InteropService()])
        let group = runner.makeServiceGroup(logger: Logger(label: "test.lifecycle"), signals: [])
        await #expect(throws: (any Error).self) { try await group.run() }
        await first.stop()
    }
}
