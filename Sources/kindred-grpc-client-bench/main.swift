// The client side of the runtime's per-call cost (Tests/Benchmarks/grpc-callgrind.sh): `GRPCClient` making unary
// InteropService/Echo calls, the way the gateway calls every service behind it.
//
// Usage: kindred-grpc-client-bench host:port calls [concurrency (default 10)]
// Makes `calls` Echo calls with `concurrency` tasks sharing one client, fails (exit 1) on any error, and prints
// `DONE calls seconds`.
import Foundation
import KindredGRPC
import KindredProto
import Logging

typealias V1 = Kindred.Testing.V1

let arguments = CommandLine.arguments
guard arguments.count >= 3, let colon = arguments[1].lastIndex(of: ":"), let port = Int(arguments[1][arguments[1].index(after: colon)...]),
    let calls = Int(arguments[2]), calls >= 0
else {
    FileHandle.standardError.write(Data("usage: kindred-grpc-client-bench host:port calls [concurrency]\n".utf8))
    exit(2)
}
let concurrency = max(1, arguments.count > 3 ? Int(arguments[3]) ?? 10 : 10)
let host = String(arguments[1][..<colon])

let client = GRPCClient(configuration: GRPCClientConfiguration(host: host, port: port), logger: Logger(label: "bench"))
var request = V1.EchoRequest()
request.message = "hello kindred"
let start = ContinuousClock.now
do {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for worker in 0..<concurrency {
            let share = calls / concurrency + (worker < calls % concurrency ? 1 : 0)
            group.addTask {
                for _ in 0..<share {
                    let response = try await client.unary(V1.InteropService.Method.echo, request)
                    guard response.message == "hello kindred" else { throw RPCError(.dataLoss, "wrong echo") }
                }
            }
        }
        try await group.waitForAll()
    }
} catch {
    FileHandle.standardError.write(Data("call failed: \(error)\n".utf8))
    exit(1)
}
let elapsed = ContinuousClock.now - start
await client.close()
print("DONE \(calls) \(Double(elapsed.components.attoseconds) / 1e18 + Double(elapsed.components.seconds))")
