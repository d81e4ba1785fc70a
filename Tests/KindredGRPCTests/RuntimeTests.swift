import Foundation
import KindredTestSupport
import KindredGRPC
import KindredGRPCServices
import KindredInterop
import KindredOpenSSL
import KindredProto
import KindredProtobuf
import Logging
import NIOCore
import NIOPosix
import Testing

typealias V1 = Kindred.Testing.V1

/// A Kindred server and client on 127.0.0.1 for one test.
struct Harness {
    let server: GRPCServer
    let client: GRPCClient
    let port: Int

    static func start(
        services: [any GRPCService] = [InteropService()],
        configure: (inout GRPCServerConfiguration) -> Void = { _ in },
        clientTLS: TLSContext? = nil,
        clientConfigure: (inout GRPCClientConfiguration) -> Void = { _ in }
    ) async throws -> Harness {
        var configuration = GRPCServerConfiguration()
        configure(&configuration)
        let server = GRPCServer(configuration: configuration, services: services, logger: Logger(label: "test.server"))
        let address = try await server.start()
        var clientConfiguration = GRPCClientConfiguration(host: "127.0.0.1", port: address.port!, tls: clientTLS)
        clientConfigure(&clientConfiguration)
        let client = GRPCClient(configuration: clientConfiguration, logger: Logger(label: "test.client"))
        return Harness(server: server, client: client, port: address.port!)
    }

    func stop() async {
        await self.client.close()
        await self.server.shutdown(grace: .seconds(1))
    }
}

func echo(_ message: String = "", delayMs: Int32 = 0) -> V1.EchoRequest {
    var request = V1.EchoRequest()
    request.message = message
    request.delayMs = delayMs
    return request
}

func expectStatus(_ code: StatusCode, _ body: () async throws -> Void) async {
    do {
        try await body()
        Issue.record("expected \(code), the call succeeded")
    } catch let error as RPCError {
        #expect(error.code == code, "\(error)")
    } catch {
        Issue.record("expected RPCError \(code), got \(error)")
    }
}

/// Polls `condition` every 20 ms for up to `timeout`: for outcomes that follow a timer, without guessing its delay.
func eventually(timeout: Duration = .seconds(10), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return condition()
}

func waitForCancellation(_ client: GRPCClient, callID: String) async throws {
    var query = V1.CancellationQuery()
    query.callId = callID
    // Up to 10 s: on a loaded 2-core machine the cancelled handler's task can wait a while for a thread.
    var state = V1.CancellationState()
    for _ in 0..<500 {
        state = try await client.unary(V1.InteropService.Method.getCancellationState, query)
        if state.cancelled && state.finished { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    // A handler that never began is as good: the deadline passed before the server ran it (a starved machine).
    if !state.started { return }
    Issue.record("the handler of \(callID) was not cancelled")
}

@Suite(.serialized) struct RuntimeTests {
    @Test func unaryWithMetadataBothWays() async throws {
        let harness = try await Harness.start()
        var metadata: Metadata = ["x-echo-initial": "hello", "x-echo-trailing": "bye", "x-plain": "v"]
        metadata.add("x-raw-bin", binary: [0, 1, 254, 255])
        let response = try await harness.client.unaryWithMetadata(
            V1.InteropService.Method.echo,
            echo("ünïcode"),
            metadata: metadata
        )
        #expect(response.message.message == "ünïcode")
        #expect(response.message.seenMetadata.contains("x-plain=v"))
        #expect(response.message.seenMetadata.contains("x-raw-bin=AAH+/w"))
        #expect(response.metadata["x-echo-initial"] == "hello")
        #expect(response.trailers["x-echo-trailing"] == "bye")
        await harness.stop()
    }

    @Test func allStreamingShapes() async throws {
        let harness = try await Harness.start()
        var request = echo("s")
        request.responseCount = 300
        request.responseSize = 2000
        let indices = try await harness.client.serverStreaming(V1.InteropService.Method.expand, request) { stream in
            var indices: [Int32] = []
            for try await response in stream {
                #expect(response.payload.count == 2000)
                indices.append(response.index)
            }
            return indices
        }
        #expect(indices == Array(0..<300))

        let collected = try await harness.client.clientStreaming(V1.InteropService.Method.collect) { writer in
            for i in 0..<100 { try await writer.write(echo(String(i))) }
        }
        #expect(collected.count == 100)
        #expect(collected.joined == (0..<100).map(String.init).joined())

        let chatted = try await harness.client.bidirectionalStreaming(V1.InteropService.Method.chat) { writer, responses in
            var received: [String] = []
            var iterator = responses.makeAsyncIterator()
            for i in 0..<20 {
                try await writer.write(echo("m\(i)"))
                received.append(try #require(try await iterator.next()).message)
            }
            writer.finish()
            #expect(try await iterator.next() == nil)
            return received
        }
        #expect(chatted == (0..<20).map { "m\($0)" })
        await harness.stop()
    }

    @Test(arguments: [StatusCode.invalidArgument, .notFound, .permissionDenied, .unauthenticated, .internalError])
    func errorStatusMessageAndDetails(code: StatusCode) async throws {
        let harness = try await Harness.start()
        var request = echo()
        request.failWithCode = Int32(code.rawValue)
        request.failWithMessage = "nöt % good\nat all"
        var metadata = Metadata()
        metadata.add("x-echo-details-bin", binary: [9, 8, 7])
        do {
            _ = try await harness.client.unary(V1.InteropService.Method.echo, request, metadata: metadata)
            Issue.record("call succeeded")
        } catch let error as RPCError {
            #expect(error.code == code)
            #expect(error.message == "nöt % good\nat all")
            #expect(error.details == [9, 8, 7])
        }
        await harness.stop()
    }

    @Test func deadlineExceededCancelsTheHandler() async throws {
        let harness = try await Harness.start()
        let callID = UUID().uuidString
        let start = ContinuousClock.now
        await expectStatus(.deadlineExceeded) {
            _ = try await harness.client.unary(
                V1.InteropService.Method.echo,
                echo(delayMs: 20_000),
                metadata: ["x-call-id": .string(callID)],
                options: CallOptions(timeout: .milliseconds(200))
            )
        }
        // Far less than the handler's 20 s: the deadline ended the call (generous bound for loaded CI machines).
        #expect(ContinuousClock.now - start < .seconds(10))
        try await waitForCancellation(harness.client, callID: callID)
        await harness.stop()
    }

    @Test func propagatedDeadlineBoundsDownstreamCalls() async throws {
        let harness = try await Harness.start()
        let start = ContinuousClock.now
        await expectStatus(.deadlineExceeded) {
            try await GRPCDeadline.$current.withValue(.now() + .milliseconds(150)) {
                _ = try await harness.client.unary(V1.InteropService.Method.echo, echo(delayMs: 20_000))
            }
        }
        #expect(ContinuousClock.now - start < .seconds(10))
        await harness.stop()
    }

    @Test func clientCancellationCancelsTheHandler() async throws {
        let harness = try await Harness.start()
        let callID = UUID().uuidString
        let task = Task {
            try await harness.client.unary(
                V1.InteropService.Method.echo,
                echo(delayMs: 10_000),
                metadata: ["x-call-id": .string(callID)]
            )
        }
        // 1 s before cancelling (the echo waits 10 s): 200 ms once cancelled the call before it reached the server
        // while the test process was starved of CPU, and the check then waited for a handler that never started.
        try await Task.sleep(for: .seconds(1))
        task.cancel()
        await expectStatus(.cancelled) { _ = try await task.value }
        try await waitForCancellation(harness.client, callID: callID)
        await harness.stop()
    }

    /// GetServerStats reads the serving server's counters: a 2 s echo counts while it runs (with the stats call
    /// itself), and no longer once it answered. (The in-process service used to answer zeros.)
    @Test func serverStatsCountAnEchoInFlight() async throws {
        let harness = try await Harness.start()
        let stats = { try await harness.client.unary(V1.InteropService.Method.getServerStats, V1.ServerStatsRequest()) }
        #expect(try await stats().activeCalls == 1)
        let inFlight = Task { try await harness.client.unary(V1.InteropService.Method.echo, echo("slow", delayMs: 2000)) }
        var counted = false
        for _ in 0..<75 where !counted {
            counted = try await stats().activeCalls == 2
            if !counted { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(counted, "the echo in flight was not counted")
        #expect(try await stats().openConnections == 1)
        #expect(try await inFlight.value.message == "slow")
        #expect(try await stats().activeCalls == 1)
        await harness.stop()
    }

    @Test func receiveLimitIsResourceExhausted() async throws {
        let harness = try await Harness.start(configure: { $0.maxReceiveMessageSize = 1000 })
        var small = echo()
        small.payload = Array(repeating: 1, count: 995)  // 1 tag byte + 2 length bytes + 995 = 998
        _ = try await harness.client.unary(V1.InteropService.Method.echo, small)
        var big = echo()
        big.payload = Array(repeating: 1, count: 1000)
        await expectStatus(.resourceExhausted) {
            _ = try await harness.client.unary(V1.InteropService.Method.echo, big)
        }
        await harness.stop()
    }

    @Test func unknownMethodIsUnimplemented() async throws {
        let harness = try await Harness.start()
        let missing = ProtoMethod<V1.EchoRequest, V1.EchoResponse>(
            service: "kindred.testing.v1.InteropService",
            name: "Missing",
            kind: .unary
        )
        await expectStatus(.unimplemented) { _ = try await harness.client.unary(missing, echo()) }
        await harness.stop()
    }

    @Test func slowReaderPushesBackOnTheWriter() async throws {
        // A client-streaming handler that does not read: the client's writes must stall once the HTTP/2
        // windows and the watermark are full, instead of queueing everything in memory.
        let gate = AsyncStream<Void>.makeStream()
        let service = StallingService(gate: gate.stream)
        let harness = try await Harness.start(services: [service])
        let written = ManagedCounter()
        let call = Task {
            try await harness.client.clientStreaming(StallingService.method) { writer in
                var message = V1.EchoRequest()
                message.payload = Array(repeating: 7, count: 64 << 10)
                for _ in 0..<400 {
                    try await writer.write(message)
                    written.increment()
                }
            }
        }
        try await Task.sleep(for: .milliseconds(500))
        let stalledAt = written.value
        // 1 MiB stream window + 256 KiB watermark ≈ 20 messages of 64 KiB; far from all 400.
        #expect(stalledAt < 40, "writer was not stopped: \(stalledAt) messages written")
        gate.continuation.finish()
        let response = try await call.value
        #expect(response.count == 400)
        await harness.stop()
    }

    @Test func slowClientPushesBackOnTheServerWriter() async throws {
        // A server-streaming handler writing faster than the client reads must wait, not buffer everything.
        let written = ManagedCounter()
        let harness = try await Harness.start(services: [FloodService(written: written)])
        let received = try await harness.client.serverStreaming(FloodService.method, V1.EchoRequest()) { stream in
            var iterator = stream.makeAsyncIterator()
            _ = try await iterator.next()
            try await Task.sleep(for: .milliseconds(500))
            // 1 MiB client window + 256 KiB watermark ≈ 20 messages of 64 KiB, far from the 400 offered.
            #expect(written.value < 40, "server writer was not stopped: \(written.value) messages written")
            var count = 1
            while try await iterator.next() != nil { count += 1 }
            return count
        }
        #expect(received == 400)
        await harness.stop()
    }

    @Test func idleConnectionsCloseAndClientsReconnect() async throws {
        let harness = try await Harness.start(configure: { $0.idleTimeout = .milliseconds(200) })
        _ = try await harness.client.unary(V1.InteropService.Method.echo, echo("before"))
        #expect(harness.server.metrics.openConnections == 1)
        #expect(await eventually { harness.server.metrics.openConnections == 0 }, "the idle connection stayed open")
        #expect(try await harness.client.unary(V1.InteropService.Method.echo, echo("after")).message == "after")
        await harness.stop()
    }

    @Test func maxConnectionAgeDrainsWithoutFailingCalls() async throws {
        let harness = try await Harness.start(configure: {
            $0.maxConnectionAge = .milliseconds(200)
            $0.maxConnectionAgeGrace = .seconds(5)
        })
        let slow = try await harness.client.unary(V1.InteropService.Method.echo, echo("slow", delayMs: 600))
        #expect(slow.message == "slow")
        // Quiescing since 200 ms: the final GOAWAY followed the PING ACK, and the connection closed after the call.
        #expect(await eventually { harness.server.metrics.openConnections == 0 }, "the aged connection stayed open")
        #expect(try await harness.client.unary(V1.InteropService.Method.echo, echo("new")).message == "new")
        await harness.stop()
    }

    @Test func gracefulShutdownFinishesInFlightCalls() async throws {
        let harness = try await Harness.start()
        let callID = UUID().uuidString
        let inFlight = Task {
            try await harness.client.unary(
                V1.InteropService.Method.echo, echo("late", delayMs: 500), metadata: ["x-call-id": .string(callID)])
        }
        // Shut down once the handler runs (not after a guessed delay: a starved machine may not have connected yet).
        var query = V1.CancellationQuery()
        query.callId = callID
        var started = false
        for _ in 0..<500 where !started {
            started = try await harness.client.unary(V1.InteropService.Method.getCancellationState, query).started
            if !started { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(started, "the call never reached its handler")
        await harness.server.shutdown(grace: .seconds(5))
        #expect(try await inFlight.value.message == "late")
        await expectStatus(.unavailable) {
            _ = try await harness.client.unary(V1.InteropService.Method.echo, echo(), options: .init(timeout: .seconds(2)))
        }
        await harness.client.close()
    }

    @Test func clientReconnectsAfterTheServerComesBack() async throws {
        let first = try await Harness.start()
        _ = try await first.client.unary(V1.InteropService.Method.echo, echo("one"))
        await first.server.shutdown(grace: .seconds(1))
        await expectStatus(.unavailable) {
            _ = try await first.client.unary(V1.InteropService.Method.echo, echo())
        }
        var configuration = GRPCServerConfiguration()
        configuration.port = first.port
        let second = GRPCServer(configuration: configuration, services: [InteropService()], logger: Logger(label: "t"))
        try await second.start()
        var answered = false
        for _ in 0..<40 where !answered {
            if (try? await first.client.unary(V1.InteropService.Method.echo, echo("two"))) != nil {
                answered = true
            } else {
                try await Task.sleep(for: .milliseconds(250))
            }
        }
        #expect(answered)
        await first.client.close()
        await second.shutdown(grace: .seconds(1))
    }

    @Test func healthReflectsShutdown() async throws {
        let runner = ServerRunner(configuration: GRPCServerConfiguration(), services: [InteropService()])
        let server = runner.makeServer(logger: Logger(label: "t"))
        let address = try await server.start()
        runner.health.setStatus(true)
        let client = GRPCClient(
            configuration: GRPCClientConfiguration(host: "127.0.0.1", port: address.port!),
            logger: Logger(label: "t")
        )
        var request = Grpc.Health.V1.HealthCheckRequest()
        #expect(try await client.unary(Grpc.Health.V1.Health.Method.check, request).status == .serving)
        request.service = "kindred.testing.v1.InteropService"
        #expect(try await client.unary(Grpc.Health.V1.Health.Method.check, request).status == .serving)
        runner.health.setAll(false)
        #expect(try await client.unary(Grpc.Health.V1.Health.Method.check, request).status == .notServing)
        await client.close()
        await server.shutdown(grace: .seconds(1))
    }

    @Test func tlsWithATestCA() async throws {
        let certificates = try await offThePool { try TestCertificates.make() }
        let harness = try await Harness.start(
            configure: {
                $0.tls = try? TLSContext(
                    configuration: .server(
                        certificateChainFile: certificates.serverCertificate,
                        privateKeyFile: certificates.serverKey
                    )
                )
            },
            clientTLS: try TLSContext(configuration: .client(trustRoots: .file(certificates.ca))),
            clientConfigure: { $0.tlsServerName = "localhost" }
        )
        #expect(try await harness.client.unary(V1.InteropService.Method.echo, echo("secure")).message == "secure")
        await harness.stop()
    }
}

/// A client-streaming method whose handler waits for a gate before reading anything.
struct StallingService: GRPCService {
    static let method = ProtoMethod<V1.EchoRequest, V1.CollectResponse>(
        service: "kindred.testing.v1.Stalling",
        name: "Collect",
        kind: .clientStreaming
    )
    let gate: AsyncStream<Void>

    func register(in router: inout GRPCRouter) {
        router.clientStreaming(Self.method) { requests, _ in
            for await _ in self.gate {}
            var response = V1.CollectResponse()
            for try await _ in requests { response.count += 1 }
            return response
        }
    }
}

/// A server-streaming method that writes 400 messages of 64 KiB, counting completed writes.
struct FloodService: GRPCService {
    static let method = ProtoMethod<V1.EchoRequest, V1.EchoResponse>(
        service: "kindred.testing.v1.Flood",
        name: "Expand",
        kind: .serverStreaming
    )
    let written: ManagedCounter

    func register(in router: inout GRPCRouter) {
        router.serverStreaming(Self.method) { _, writer, _ in
            var response = V1.EchoResponse()
            response.payload = Array(repeating: 3, count: 64 << 10)
            for _ in 0..<400 {
                try await writer.write(response)
                self.written.increment()
            }
        }
    }
}

final class ManagedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { self.lock.withLock { self.count += 1 } }
    var value: Int { self.lock.withLock { self.count } }
}

/// A throwaway CA and a server certificate for localhost, made with the openssl CLI.
struct TestCertificates {
    let ca: String
    let serverCertificate: String
    let serverKey: String

    static func make() throws -> TestCertificates {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kindred-certs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        func openssl(_ arguments: [String]) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = arguments
            process.currentDirectoryURL = directory
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw RPCError(.internalError, "openssl \(arguments[0]) failed") }
        }
        try openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj",
            "/CN=Test CA", "-keyout", "ca.key", "-out", "ca.pem",
        ])
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\n".write(
            to: directory.appendingPathComponent("server.ext"),
            atomically: true,
            encoding: .utf8
        )
        try openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=localhost", "-keyout",
            "server.key", "-out", "server.csr",
        ])
        try openssl([
            "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
            "-extfile", "server.ext", "-out", "server.pem",
        ])
        return TestCertificates(
            ca: directory.appendingPathComponent("ca.pem").path,
            serverCertificate: directory.appendingPathComponent("server.pem").path,
            serverKey: directory.appendingPathComponent("server.key").path
        )
    }
}
