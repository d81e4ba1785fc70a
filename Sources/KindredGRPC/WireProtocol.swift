/// The protocol a call came in on. Every protocol reaches the same router and handlers; they differ only at the
/// edge: how the request body carries its message, and how headers, messages and the status go back.
///
/// - gRPC (`application/grpc…`): length-prefixed messages, the status in HTTP/2 trailers.
/// - gRPC-Web (`application/grpc-web`, `application/grpc-web+proto`): gRPC's messages, the status in a last
///   length-prefixed frame with flag 0x80 whose body is the trailers as HTTP/1 header lines (PROTOCOL-WEB.md),
///   so it needs no HTTP trailers (browsers expose none).
/// - Connect unary (`application/proto`, `application/json`, POST): the body is one bare message; the answer is
///   a real HTTP status, the message or a Connect error JSON, and trailing metadata as `trailer-` headers.
/// - Connect streaming (`application/connect+proto`, `application/connect+json`): Connect's envelopes (flag
///   byte, 4-byte length) and an end-of-stream envelope (flag 0x02) holding the status and trailers as JSON.
public enum WireProtocol: Hashable, Sendable {
    case grpc
    case grpcWeb
    case connectUnary(ConnectCodec)
    case connectStreaming(ConnectCodec)

    /// The message encoding of a Connect call.
    public enum ConnectCodec: Hashable, Sendable {
        case proto
        case json
    }

    /// The protocol a request's content type names; nil when it names none Kindred serves (gRPC-Web's base64
    /// `-text` form and codecs other than proto and JSON included).
    public static func detect(contentType: String) -> WireProtocol? {
        // gRPC's own content type, on nearly every call, without the splitting, trimming and lower-casing below
        // (11k instructions per call).
        if contentType.utf8.count == 16 && contentType == "application/grpc" { return .grpc }
        // Parameters (`; charset=utf-8`) do not change the protocol.
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first.map {
            $0.trimmingCharacters(in: " \t").lowercased()
        } ?? ""
        switch mediaType {
        case "application/grpc-web", "application/grpc-web+proto": return .grpcWeb
        case "application/proto": return .connectUnary(.proto)
        case "application/json": return .connectUnary(.json)
        case "application/connect+proto": return .connectStreaming(.proto)
        case "application/connect+json": return .connectStreaming(.json)
        default:
            // gRPC proper: `application/grpc`, `application/grpc+proto` (and any `+codec`, refused by decoding).
            if mediaType == "application/grpc" || mediaType.hasPrefix("application/grpc+") { return .grpc }
            return nil
        }
    }

    /// Whether the request body is length-prefixed messages (everything but Connect unary's bare message).
    var isFramed: Bool {
        if case .connectUnary = self { return false }
        return true
    }

    /// Whether messages are JSON (Connect only).
    var usesJSON: Bool {
        switch self {
        case .connectUnary(.json), .connectStreaming(.json): true
        default: false
        }
    }

    /// Whether the protocol is one of the web protocols a server serves only when configured to
    /// (`GRPCServerConfiguration.web`).
    var isWeb: Bool { self != .grpc }

    /// The content type of a successful response.
    var responseContentType: String {
        switch self {
        case .grpc: "application/grpc"
        case .grpcWeb: "application/grpc-web+proto"
        case .connectUnary(.proto): "application/proto"
        case .connectUnary(.json): "application/json"
        case .connectStreaming(.proto): "application/connect+proto"
        case .connectStreaming(.json): "application/connect+json"
        }
    }

    /// The request header that carries the call's timeout.
    var timeoutHeader: String {
        switch self {
        case .grpc, .grpcWeb: "grpc-timeout"
        case .connectUnary, .connectStreaming: "connect-timeout-ms"
        }
    }

    /// The request header that names the request's compression, and the response header that lists what the
    /// server accepts.
    var encodingHeaders: (request: String, accept: String) {
        switch self {
        case .grpc, .grpcWeb: ("grpc-encoding", "grpc-accept-encoding")
        case .connectUnary: ("content-encoding", "accept-encoding")
        case .connectStreaming: ("connect-content-encoding", "connect-accept-encoding")
        }
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var result = self
        while let first = result.first, set.contains(first) { result.removeFirst() }
        while let last = result.last, set.contains(last) { result.removeLast() }
        return String(result)
    }
}
