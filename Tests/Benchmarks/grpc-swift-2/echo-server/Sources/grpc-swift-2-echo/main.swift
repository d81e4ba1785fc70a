// grpc-swift-2 2.4.3 (HTTP/2 over SwiftNIO, POSIX transport, plaintext) serving kindred.testing.v1.InteropService/Echo,
// the method Tests/Benchmarks/grpc-h2load.sh calls on Kindred and on the bare yardstick. The service is written by
// hand with a raw-bytes codec instead of protoc-generated code (no protoc plugin build): h2load's request is an
// EchoRequest carrying only `message` (field 1), and an EchoResponse carrying the same `message` has the same bytes,
// so echoing the request bytes sends exactly the response the yardstick sends.
//
// Usage: grpc-swift-2-echo [port]   (0 or none: a free port). Prints `LISTENING host:port`.
import GRPCCore
import GRPCNIOTransportHTTP2

#if canImport(Glibc)
import Glibc
#endif

/// Passes message bytes through unchanged.
struct RawBytesCodec: MessageSerializer, MessageDeserializer {
    func serialize<Bytes: GRPCContiguousBytes>(_ message: [UInt8]) throws -> Bytes {
        Bytes(message)
    }

    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> [UInt8] {
        serializedMessageBytes.withUnsafeBytes { Array($0) }
    }
}

/// InteropService/Echo as a unary method answering the request's bytes.
struct EchoService: RegistrableRPCService {
    static let echo = MethodDescriptor(fullyQualifiedService: "kindred.testing.v1.InteropService", method: "Echo")

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        router.registerHandler(
            forMethod: Self.echo,
            deserializer: RawBytesCodec(),
            serializer: RawBytesCodec()
        ) { request, _ in
            let single = try await ServerRequest(stream: request)
            return StreamingServerResponse(single: ServerResponse(message: single.message))
        }
    }
}

let port = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 0 : 0
let server = GRPCServer(
    transport: .http2NIOPosix(
        address: .ipv4(host: "127.0.0.1", port: port),
        transportSecurity: .plaintext
    ),
    services: [EchoService()]
)
try await withThrowingDiscardingTaskGroup { group in
    group.addTask { try await server.serve() }
    if let address = try await server.listeningAddress?.ipv4 {
        print("LISTENING \(address.host):\(address.port)")
        fflush(nil)  // stdout is a file for the benchmark script: fully buffered
    }
}
