import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredProto
import Logging
import NIOCore
import NIOPosix
import Testing

/// Answers Echo with the request id it sees, prefixed to what its downstream (if any) saw.
private struct RequestIDService: GRPCService {
    let downstream: GRPCClient?

    func register(in router: inout GRPCRouter) {
        router.unary(V1.InteropService.Method.echo) { _, context in
            var response = V1.EchoResponse()
            response.message = context.requestID
            if let downstream {
                let below = try await downstream.unary(V1.InteropService.Method.echo, echo())
                response.message += "|" + below.message
            }
            return response
        }
    }
}

@Suite("Server conventions: request ids, admin port, JSON logs, environment")
struct ServerConventionsTests {
    @Test("a request id follows the call downstream; a usable caller id is kept, a bad one replaced")
    func requestIDPropagates() async throws {
        let backend = try await Harness.start(services: [RequestIDService(downstream: nil)])
        let front = try await Harness.start(services: [RequestIDService(downstream: backend.client)])
        let kept = try await front.client.unary(
            V1.InteropService.Method.echo, echo(), metadata: ["x-request-id": "req-42"])
        #expect(kept.message == "req-42|req-42")

        let generated = try await front.client.unary(V1.InteropService.Method.echo, echo())
        let parts = generated.message.split(separator: "|")
        #expect(parts.count == 2 && parts[0] == parts[1] && parts[0].count == 16)

        let replaced = try await front.client.unary(
            V1.InteropService.Method.echo, echo(), metadata: ["x-request-id": .string(String(repeating: "x", count: 500))])
        #expect(replaced.message.split(separator: "|").first?.count == 16)
        await front.stop()
        await backend.stop()
    }

    @Test("admin port: /metrics in Prometheus text after calls, /healthz follows health, other paths 404")
    func adminPort() async throws {
        var runner = ServerRunner(configuration: GRPCServerConfiguration(), services: [RequestIDService(downstream: nil)])
        runner.admin = AdminServer.Configuration(host: "127.0.0.1", port: 0)
        runner.extraMetrics = [{ "# TYPE extra_total counter\nextra_total 7\n" }]
        let logger = Logger(label: "test.admin")
        let server = runner.makeServer(logger: logger)
        let address = try await server.start()
        runner.health.setStatus(true)
        let admin = try #require(runner.makeAdminServer(logger: logger))
        let adminAddress = try await admin.start()
        let client = GRPCClient(configuration: GRPCClientConfiguration(host: "127.0.0.1", port: address.port!), logger: logger)
        _ = try await client.unary(V1.InteropService.Method.echo, echo())

        let metrics = try await Self.httpGet(port: adminAddress.port!, path: "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.body.contains("grpc_server_handled_total{grpc_method=\"/kindred.testing.v1.InteropService/Echo\",grpc_code=\"OK\"} 1"))
        #expect(metrics.body.contains("extra_total 7"))
        #expect(try await Self.httpGet(port: adminAddress.port!, path: "/healthz").status == 200)
        runner.health.setAll(false)
        #expect(try await Self.httpGet(port: adminAddress.port!, path: "/healthz").status == 503)
        #expect(try await Self.httpGet(port: adminAddress.port!, path: "/secret").status == 404)

        await client.close()
        await admin.stop()
        await server.shutdown(grace: .seconds(1))
    }

    @Test("JSON log lines are valid JSON with escaped values")
    func jsonLogs() throws {
        let lines = LinesBox()
        var handler = JSONLogHandler(label: "kindred.test") { lines.append($0) }
        handler.logLevel = .info
        var logger = Logger(label: "kindred.test") { _ in handler }
        logger.logLevel = .info
        logger.info("said \"hi\"\nthen left", metadata: ["request_id": "r1", "odd": "tab\there\u{1}"])
        let line = try #require(lines.values.first)
        #expect(line.hasSuffix("\n") && line.dropLast().contains("\n") == false)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        #expect(object["msg"] == "said \"hi\"\nthen left")
        #expect(object["level"] == "info")
        #expect(object["request_id"] == "r1")
        #expect(object["odd"] == "tab\there\u{1}")
        #expect(object["ts"]?.hasSuffix("Z") == true)
    }

    @Test("environment values: addresses, off, ranges")
    func environment() throws {
        let reader = EnvironmentReader(["A": "[::1]:80", "B": "off", "C": "70000", "D": " ", "E": "yes"])
        #expect(try reader.address("A", default: HostPort(host: "x", port: 1)) == HostPort(host: "::1", port: 80))
        #expect(try reader.optionalAddress("B", default: HostPort(host: "x", port: 1)) == nil)
        #expect(throws: ConfigurationError.self) { try reader.int("C", default: 1, in: 1...65_535) }
        #expect(try reader.int("D", default: 5) == 5)
        #expect(try reader.bool("E", default: false))
        #expect(HostPort(host: "0.0.0.0", port: 5).dialable == HostPort(host: "127.0.0.1", port: 5))
    }

    /// A minimal HTTP/1.1 GET over a plain socket.
    static func httpGet(port: Int, path: String) async throws -> (status: Int, body: String) {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(ByteBuffer(string: "GET \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
            var text = ""
            for try await var buffer in inbound { text += buffer.readString(length: buffer.readableBytes) ?? "" }
            let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
            let body = text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) } ?? ""
            return (status, body)
        }
    }
}

private final class LinesBox: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { self.lock.withLock { self.lines.append(line) } }
    var values: [String] { self.lock.withLock { self.lines } }
}
