import KindredGRPC
import KindredInterop
import KindredProto
import Testing

/// The client pool against a real server that allows few streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS
/// 4): calls go where a stream is free, on another connection, or wait; none is refused, none waits for nothing.
@Suite(.serialized) struct StreamLimitTests {
    /// Ten long calls at once on a fresh client: all complete, none refused (the first connection's SETTINGS must
    /// be known before calls go out), and they run on three connections (4 + 4 + 2 streams) instead of queueing
    /// on one.
    @Test func tenConcurrentCallsOnAServerAllowingFour() async throws {
        let harness = try await Harness.start(
            configure: { $0.http2.maxConcurrentStreams = 4 },
            clientConfigure: { $0.connectionCount = 1 }
        )
        let replies = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<10 {
                group.addTask {
                    try await harness.client.unary(
                        V1.InteropService.Method.echo,
                        echo("call \(index)", delayMs: 1000),
                        options: .init(timeout: .seconds(10))
                    ).message
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(replies) == Set((0..<10).map { "call \($0)" }))
        #expect(harness.server.metrics.openConnections == 3)
        await harness.stop()
    }

    /// Four long calls hold every stream of the first connection: a short call must not wait behind them (the
    /// gateway's chat subscriptions used to make every other chat call time out this way).
    @Test func shortCallIsNotStuckBehindLongCallsHoldingEveryStream() async throws {
        let harness = try await Harness.start(
            configure: { $0.http2.maxConcurrentStreams = 4 },
            clientConfigure: { $0.connectionCount = 1 }
        )
        // One call first, so that the connection and its limit are known before the long calls go out.
        _ = try await harness.client.unary(V1.InteropService.Method.echo, echo("warm-up"))
        let long = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        _ = try await harness.client.unary(
                            V1.InteropService.Method.echo,
                            echo("long", delayMs: 3000),
                            options: .init(timeout: .seconds(10))
                        )
                    }
                }
                try await group.waitForAll()
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        let reply = try await harness.client.unary(
            V1.InteropService.Method.echo,
            echo("short"),
            options: .init(timeout: .seconds(2))
        )
        #expect(reply.message == "short")
        try await long.value
        await harness.stop()
    }

    /// At `maxConnectionCount` with every stream in use, a call waits for one: it runs when one frees, fails with
    /// RESOURCE_EXHAUSTED when its deadline passes first, and with CANCELLED when its task is cancelled.
    @Test func callsWaitForAFreeStreamAtTheConnectionBound() async throws {
        let harness = try await Harness.start(
            configure: { $0.http2.maxConcurrentStreams = 2 },
            clientConfigure: {
                $0.connectionCount = 1
                $0.maxConnectionCount = 1
            }
        )
        _ = try await harness.client.unary(V1.InteropService.Method.echo, echo("warm-up"))
        let long = (0..<2).map { _ in
            Task {
                try await harness.client.unary(
                    V1.InteropService.Method.echo,
                    echo("long", delayMs: 1500),
                    options: .init(timeout: .seconds(10))
                ).message
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        let waiting = Task {
            try await harness.client.unary(V1.InteropService.Method.echo, echo("waited"), options: .init(timeout: .seconds(10)))
        }
        let cancelled = Task {
            try await harness.client.unary(V1.InteropService.Method.echo, echo(), options: .init(timeout: .seconds(10)))
        }
        await expectStatus(.resourceExhausted) {
            _ = try await harness.client.unary(V1.InteropService.Method.echo, echo(), options: .init(timeout: .milliseconds(200)))
        }
        cancelled.cancel()
        await expectStatus(.cancelled) { _ = try await cancelled.value }
        #expect(try await waiting.value.message == "waited")
        for call in long { #expect(try await call.value == "long") }
        #expect(harness.server.metrics.openConnections == 1)
        await harness.stop()
    }
}
