import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredProto
import KindredProtobuf
import NIOConcurrencyHelpers

typealias V1 = Kindred.Testing.V1

/// The interop test service (`kindred.testing.v1.InteropService`): every call shape, with knobs for
/// failures, delays and sizes, and a record of cancellations so tests can check the runtime cancelled a
/// handler. Used by the runtime tests, the Python grpcio suite and the benchmark.
public final class InteropService: GRPCService {
    private struct CallRecord {
        var started = false
        var cancelled = false
        var finished = false
    }

    private let records = NIOLockedValueBox([String: CallRecord]())

    public init() {}

    public func register(in router: inout GRPCRouter) {
        router.immediateUnary(V1.InteropService.Method.echo) { request, context in
            // An echo that waits, or that a test tracks for cancellation, runs as a task; the rest answer at once.
            guard request.delayMs == 0, context.metadata["x-call-id"] == nil else {
                return .later {
                    try await self.track(context) {
                        try await self.echo(request, context: context, index: 0)
                    }
                }
            }
            return .now(try self.echoNow(request, context: context, index: 0))
        }
        router.serverStreaming(V1.InteropService.Method.expand) { request, writer, context in
            try await self.track(context) {
                try Self.failIfAsked(request, context: context)
                let payload = [UInt8](repeating: 0x6B, count: Int(max(0, min(request.responseSize, 4 << 20))))
                for index in 0..<max(0, min(request.responseCount, 10_000)) {
                    var response = V1.EchoResponse()
                    response.message = request.message
                    response.payload = payload
                    response.index = index
                    try await writer.write(response)
                }
            }
        }
        router.clientStreaming(V1.InteropService.Method.collect) { requests, context in
            try await self.track(context) {
                var response = V1.CollectResponse()
                for try await request in requests {
                    try Self.failIfAsked(request, context: context)
                    response.count += 1
                    response.joined += request.message
                    response.payloadBytes += Int64(request.payload.count)
                }
                return response
            }
        }
        router.bidirectionalStreaming(V1.InteropService.Method.chat) { requests, writer, context in
            try await self.track(context) {
                var index: Int32 = 0
                for try await request in requests {
                    try await writer.write(try await self.echo(request, context: context, index: index))
                    index += 1
                }
            }
        }
        router.unary(V1.InteropService.Method.getCancellationState) { query, _ in
            let record = self.records.withLockedValue { $0[query.callId] } ?? CallRecord()
            var state = V1.CancellationState()
            state.cancelled = record.cancelled
            state.finished = record.finished
            state.started = record.started
            return state
        }
        router.unary(V1.InteropService.Method.getServerStats) { _, context in
            // The counters of the server this call runs on, whichever process or test set it up.
            var stats = V1.ServerStatsResponse()
            stats.activeCalls = Int32(context.serverMetrics.activeCalls)
            stats.openConnections = Int32(context.serverMetrics.openConnections)
            stats.residentBytes = Int64(ProcessMemory.residentBytes())
            return stats
        }
    }

    private func echo(_ request: V1.EchoRequest, context: ServerContext, index: Int32) async throws -> V1.EchoResponse {
        if request.delayMs > 0 {
            try await Task.sleep(for: .milliseconds(min(request.delayMs, 60_000)))
        }
        return try self.echoNow(request, context: context, index: index)
    }

    /// The echo itself: the request's message and payload, the metadata it saw, `x-echo-initial` and
    /// `x-echo-trailing` sent back as response metadata and trailers.
    private func echoNow(_ request: V1.EchoRequest, context: ServerContext, index: Int32) throws -> V1.EchoResponse {
        try Self.failIfAsked(request, context: context)
        var initial = Metadata()
        var trailing = Metadata()
        var seen: [String] = []
        for (key, value) in context.metadata {
            switch value {
            case .string(let text):
                seen.append("\(key)=\(text)")
                if key == "x-echo-initial" { initial.add(key, text) }
                if key == "x-echo-trailing" { trailing.add(key, text) }
            case .binary(let bytes):
                seen.append("\(key)=\(Base64.encode(bytes, padding: false))")
            }
        }
        context.setResponseMetadata(initial)
        context.setTrailingMetadata(trailing)
        var response = V1.EchoResponse()
        response.message = request.message
        response.payload = request.payload
        response.index = index
        response.seenMetadata = seen.sorted()
        return response
    }

    private static func failIfAsked(_ request: V1.EchoRequest, context: ServerContext) throws {
        guard request.failWithCode != 0 else { return }
        guard let code = StatusCode(rawValue: Int(request.failWithCode)), code != .ok else {
            throw RPCError(.invalidArgument, "fail_with_code must be 1...16")
        }
        throw RPCError(code, request.failWithMessage, details: context.metadata.binary("x-echo-details-bin"))
    }

    /// Records whether a call tagged with `x-call-id` saw cancellation, and when its handler returned.
    private func track<T>(_ context: ServerContext, _ body: () async throws -> T) async throws -> T {
        guard let id = context.metadata["x-call-id"] else { return try await body() }
        self.records.withLockedValue { $0[id] = CallRecord(started: true) }
        defer {
            let cancelled = Task.isCancelled
            self.records.withLockedValue { records in
                records[id]?.finished = true
                if cancelled { records[id]?.cancelled = true }
            }
        }
        return try await body()
    }
}
