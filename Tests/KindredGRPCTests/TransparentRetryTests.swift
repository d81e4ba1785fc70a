import Foundation
import KindredGRPC
import KindredProto
import Logging
import Testing

/// A unary call the server never saw (its stream was above the last stream id of a GOAWAY, as when a server closes
/// a connection as idle while the call is on its way) goes again on another connection, so the caller never sees
/// the race. The server is `Tests/Peers/goaway_peer.py` (Python `h2`): GOAWAY for its first connection's first
/// request, an answer for every later one.
@Suite struct TransparentRetryTests {
    @Test func aCallTheServerNeverSawGoesAgainOnANewConnection() async throws {
        let record = FileManager.default.temporaryDirectory.appendingPathComponent("goaway-\(UUID().uuidString).jsonl")
        defer { try? FileManager.default.removeItem(at: record) }
        let peer = try await PythonServerInteropTests.PythonServer.start(
            script: "Tests/Peers/goaway_peer.py", arguments: ["--record", record.path])
        let client = GRPCClient(
            configuration: GRPCClientConfiguration(host: "127.0.0.1", port: peer.port), logger: Logger(label: "test"))
        var failure: (any Error)?
        do { _ = try await client.unary(V1.InteropService.Method.echo, echo("twice")) } catch { failure = error }
        await client.close()
        await peer.stop()
        #expect(failure == nil, "the call failed: \(String(describing: failure))")
        let requests = try String(contentsOf: record, encoding: .utf8).split(separator: "\n").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:]
        }
        #expect(requests.map { $0["connection"] as? Int } == [1, 2], "refused on the first connection, then a new one")
        #expect(requests.map { $0["refused"] as? Bool } == [true, false])
        // The retry carries the request again: its gRPC frame's 5 bytes and the message.
        let message: [UInt8] = try echo("twice").serializedBytes()
        #expect(requests.last?["bytes"] as? Int == 5 + message.count)
    }
}
