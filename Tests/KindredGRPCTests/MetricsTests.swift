import CoreMetrics
import KindredGRPC
import KindredGRPCServices
import KindredInterop
import KindredProto
import Logging
import MetricsTestKit
import Prometheus
import Synchronization
import Testing

/// The runtime's metrics through swift-metrics: a private Prometheus registry per server, or another backend.
@Suite("Server metrics")
struct MetricsTests {
    static let echoPath = "/kindred.testing.v1.InteropService/Echo"

    /// Starts a server with `metrics`, makes `calls` Echo calls, and stops it.
    static func serve(_ metrics: ServerMetrics, calls: Int) async throws {
        var runner = ServerRunner(configuration: GRPCServerConfiguration(), services: [InteropService()])
        runner.metrics = metrics
        let logger = Logger(label: "test.metrics")
        let server = runner.makeServer(logger: logger)
        let address = try await server.start()
        let client = GRPCClient(configuration: GRPCClientConfiguration(host: "127.0.0.1", port: address.port!), logger: logger)
        for _ in 0..<calls { _ = try await client.unary(V1.InteropService.Method.echo, echo()) }
        await client.close()
        await server.shutdown(grace: .seconds(1))
    }

    @Test("two servers in one process keep separate registries with exact counts")
    func separateRegistries() async throws {
        let first = ServerMetrics()
        let second = ServerMetrics()
        #expect(first.registry != nil && first.registry !== second.registry)
        try await Self.serve(first, calls: 3)
        try await Self.serve(second, calls: 2)
        let text = first.prometheusText()
        #expect(text.contains("grpc_server_handled_total{grpc_method=\"\(Self.echoPath)\",grpc_code=\"OK\"} 3\n"))
        #expect(text.contains("# TYPE grpc_server_handled_total counter\n"))
        #expect(text.contains("# TYPE grpc_server_handling_seconds histogram\n"))
        #expect(text.contains("grpc_server_handling_seconds_count{grpc_method=\"\(Self.echoPath)\"} 3\n"))
        #expect(text.contains("grpc_server_handling_seconds_sum{grpc_method=\"\(Self.echoPath)\"} "))
        #expect(text.contains("grpc_server_connections_total 1\n"))
        #expect(text.contains("grpc_server_connections_open 0.0\n"))
        #expect(text.contains("grpc_server_calls_active 0.0\n"))
        for reason in ["flood", "too_many_glitches", "too_many_pings"] {
            #expect(text.contains("grpc_server_abusive_connections_total{reason=\"\(reason)\"} 0\n"))
        }
        for timeout in ["handshake", "first_request", "request_body", "write_stall"] {
            #expect(text.contains("grpc_server_timeouts_total{timeout=\"\(timeout)\"} 0\n"))
        }
        #expect(second.prometheusText().contains("grpc_server_handled_total{grpc_method=\"\(Self.echoPath)\",grpc_code=\"OK\"} 2\n"))
        #expect(first.finishedCalls(path: Self.echoPath, code: .ok) == 3)
        #expect(second.finishedCalls(path: Self.echoPath, code: .ok) == 2)
    }

    @Test("another swift-metrics backend gets the runtime's metrics; in-process queries still answer")
    func otherBackend() async throws {
        let backend = TestMetrics()
        let metrics = ServerMetrics(factory: backend)
        try await Self.serve(metrics, calls: 4)
        let handled = try backend.expectCounter("grpc_server_handled_total", [("grpc_method", Self.echoPath), ("grpc_code", "OK")])
        #expect(handled.totalValue == 4)
        #expect(try backend.expectTimer("grpc_server_handling_seconds", [("grpc_method", Self.echoPath)]).values.count == 4)
        #expect(try backend.expectCounter("grpc_server_connections_total").totalValue == 1)
        #expect(try backend.expectMeter("grpc_server_calls_active").lastValue == 0)
        #expect(metrics.finishedCalls(path: Self.echoPath, code: .ok) == 4)
        #expect(metrics.activeCalls == 0 && metrics.openConnections == 0)
        #expect(metrics.registry == nil && metrics.prometheusText() == "")
    }

    @Test("samplers run before each rendering")
    func samplersRunAtScrape() {
        let metrics = ServerMetrics(registry: PrometheusCollectorRegistry())
        let gauge = CoreMetrics.Gauge(label: "sampled_value", factory: metrics.factory)
        let counter = SampledCounter()
        metrics.addSampler { gauge.record(counter.next()) }
        #expect(metrics.prometheusText().contains("sampled_value 1.0\n"))
        #expect(metrics.prometheusText().contains("sampled_value 2.0\n"))
    }
}

private final class SampledCounter: Sendable {
    private let value = Mutex(0)
    func next() -> Int {
        self.value.withLock {
            $0 += 1
            return $0
        }
    }
}
