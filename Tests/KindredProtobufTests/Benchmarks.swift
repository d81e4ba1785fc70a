import Foundation
import KindredProto
import KindredProtobuf
import Testing

/// ns/op for EchoRequest-sized messages. Prints, never asserts: timings depend on the machine.
/// Run in release: `KINDRED_PROTO_BENCH=1 swift test -c release --filter ProtoBenchmarks`.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["KINDRED_PROTO_BENCH"] != nil))
struct ProtoBenchmarks {
    static func sampleRequest() -> Kindred.Testing.V1.EchoRequest {
        var request = Kindred.Testing.V1.EchoRequest()
        request.message = "hello from the interop suite, call 42"
        request.payload = Array(repeating: 0xab, count: 24)
        request.failWithMessage = "nope"
        request.delayMs = 15
        request.responseCount = 3
        request.responseSize = 1024
        return request
    }

    /// Prints the best of five batches: the machine is shared, and the minimum is the least noisy.
    private func measure(_ label: String, iterations: Int = 200_000, _ body: () throws -> Void) rethrows {
        for _ in 0..<iterations / 10 { try body() }
        var best = Double.infinity
        for _ in 0..<5 {
            let start = ContinuousClock.now
            for _ in 0..<iterations { try body() }
            let elapsed = ContinuousClock.now - start
            let nanoseconds = Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
            best = min(best, nanoseconds / Double(iterations))
        }
        print("bench \(label): \(String(format: "%.0f", best)) ns/op")
    }

    @Test func echoRequest() throws {
        let request = Self.sampleRequest()
        let bytes = try request.serializedBytes()
        print("bench EchoRequest size: \(bytes.count) bytes")
        var sink = 0
        try measure("encode serializedBytes()") { sink &+= try request.serializedBytes().count }
        try measure("encode withUnsafeSerializedBytes") { sink &+= try request.withUnsafeSerializedBytes { $0.count } }
        try measure("decode [UInt8]") {
            sink &+= try Kindred.Testing.V1.EchoRequest(serializedBytes: bytes).message.utf8.count
        }
        try bytes.withUnsafeBytes { buffer in
            try measure("decode UnsafeRawBufferPointer") {
                sink &+= try Kindred.Testing.V1.EchoRequest(serializedBytes: buffer).payload.count
            }
        }
        let small = Kindred.Testing.V1.CancellationState()
        try measure("encode empty message") { sink &+= try small.serializedBytes().count }
        #expect(sink != 0)
    }
}
