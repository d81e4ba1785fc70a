import KindredGRPC
import KindredInterop
import KindredProto
import Testing

/// A client-streaming method that answers after the first request message, without reading the rest.
private struct EarlyAnswerService: GRPCService {
    func register(in router: inout GRPCRouter) {
        router.clientStreaming(V1.InteropService.Method.collect) { requests, _ in
            var response = V1.CollectResponse()
            for try await request in requests {
                response.count += 1
                response.payloadBytes += Int64(request.payload.count)
                break
            }
            return response
        }
    }
}

/// Messages about the size of the default 1 MiB windows, on both sides, and a server that answers early.
@Suite struct FlowControlTests {
    @Test("client streaming of ~1 MB messages at the default 1 MiB window does not stall")
    func megabyteRequestMessages() async throws {
        // Before the fix, a message's bytes returned to the window while it was partial were counted again when
        // it was read, the next message's partial bytes were then never returned, and the stream stalled until
        // the body timeout failed the call.
        let harness = try await Harness.start(configure: { $0.requestBodyTimeout = .seconds(5) })
        let response = try await harness.client.clientStreaming(
            V1.InteropService.Method.collect,
            options: .init(timeout: .seconds(60))
        ) { writer in
            var message = V1.EchoRequest()
            message.payload = Array(repeating: 1, count: 1_000_000)
            for _ in 0..<4 { try await writer.write(message) }
        }
        #expect(response.count == 4)
        #expect(response.payloadBytes == 4_000_000)
        await harness.stop()
    }

    @Test("server streaming of ~1 MB messages to the Kindred client does not stall")
    func megabyteResponseMessages() async throws {
        let harness = try await Harness.start()
        var request = echo("big")
        request.responseCount = 4
        request.responseSize = 1_000_000
        let sizes = try await harness.client.serverStreaming(
            V1.InteropService.Method.expand,
            request,
            options: .init(timeout: .seconds(30))
        ) { stream in
            var sizes: [Int] = []
            for try await response in stream { sizes.append(response.payload.count) }
            return sizes
        }
        #expect(sizes == Array(repeating: 1_000_000, count: 4))
        await harness.stop()
    }

    @Test("a server that answers before the client finished writing: the caller gets the response")
    func earlyAnswerReachesTheCaller() async throws {
        // Before the fix the writer threw the call's final status, OK, so the caller saw an "error" with status
        // OK and never the response.
        let harness = try await Harness.start(services: [EarlyAnswerService()])
        let response = try await harness.client.clientStreaming(
            V1.InteropService.Method.collect,
            options: .init(timeout: .seconds(30))
        ) { writer in
            var message = V1.EchoRequest()
            message.payload = Array(repeating: 2, count: 64 << 10)
            for _ in 0..<200 { try await writer.write(message) }
        }
        #expect(response.count == 1)
        #expect(response.payloadBytes == 64 << 10)
        // The connection is still good for the next call.
        let again = try await harness.client.clientStreaming(V1.InteropService.Method.collect) { writer in
            try await writer.write(echo("one"))
        }
        #expect(again.count == 1)
        await harness.stop()
    }
}
