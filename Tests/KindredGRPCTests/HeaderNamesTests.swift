import Testing

@testable import KindredGRPC

/// The header names the runtime recognises by length and bytes instead of a string `switch` (see
/// `CallOpening.RequestField`, `Metadata.isReserved`): each one is found, and near misses are not.
struct HeaderNamesTests {
    static let reserved = [
        "te", "host", "upgrade", "connection", "keep-alive", "grpc-status", "content-type", "grpc-timeout",
        "grpc-message", "grpc-encoding", "content-length", "proxy-connection", "transfer-encoding",
        "grpc-accept-encoding", "grpc-status-details-bin", ":path", ":method", ":authority", ":scheme", ":status",
    ]
    static let custom = [
        "user-agent", "x-request-id", "tf", "hosts", "grpc-statuz", "content-typo", "grpc-timeouts", "authorization",
        "origin", "grpc-accept-encodinG", "x-raw-bin", "", "keep-alive2", "upgradE",
    ]

    @Test(arguments: reserved) func reservedNames(name: String) {
        #expect(Metadata.isReserved(name))
    }

    @Test(arguments: custom) func customNames(name: String) {
        #expect(!Metadata.isReserved(name))
    }

    @Test func requestFields() {
        let fields: [(String, CallOpening.RequestField)] = [
            (":method", .method), (":path", .path), ("content-type", .contentType), ("grpc-timeout", .grpcTimeout),
            ("grpc-encoding", .grpcEncoding), ("connect-timeout-ms", .connectTimeout),
            ("content-encoding", .contentEncoding), ("connect-content-encoding", .connectEncoding),
            ("connect-protocol-version", .connectVersion), ("origin", .origin),
            ("access-control-request-method", .preflightMethod),
        ]
        for (name, field) in fields { #expect(CallOpening.RequestField(name) == field, "\(name)") }
        for name in [":scheme", ":authority", "te", "user-agent", "grpc-timeouT", "connect-protocol-versioN", "origins", ""] {
            #expect(CallOpening.RequestField(name) == nil, "\(name)")
        }
    }

    @Test func binaryKeys() {
        #expect(Metadata.isBinaryKey("x-raw-bin"))
        #expect(Metadata.isBinaryKey("-bin"))
        #expect(!Metadata.isBinaryKey("bin"))
        #expect(!Metadata.isBinaryKey("x-raw-biN"))
        #expect(!Metadata.isBinaryKey("x-binary"))
    }
}
