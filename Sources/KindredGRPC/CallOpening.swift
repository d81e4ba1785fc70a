import KindredHTTP2
import NIOCore

/// What a request's headers open, decided the same way whether they came in an HTTP/2 HEADERS frame or an
/// HTTP/1.1 request head (its request line as `:method` and `:path`): a call of a registered method in one of the
/// server's protocols, a refusal in the caller's protocol, a plain HTTP refusal, or a CORS preflight's answer.
/// A pure function of the headers and the server's configuration.
enum CallOpening {
    /// `message`: the request message a Connect GET carries in its URL (`ConnectGet`), delivered as the body;
    /// nil for calls whose message comes in the body.
    case call(handler: MethodHandler, path: String, response: WireResponse, deadline: NIODeadline?, message: [UInt8]? = nil)
    /// A status in the request's protocol. `unknownMethod`: counted as a call of path "unknown".
    case refuse(WireResponse, RPCError, unknownMethod: Bool)
    /// Not a call of any protocol served here (wrong method, unknown content type).
    case http(status: String, message: String)
    /// A CORS preflight's answer.
    case preflight([HTTP2Header])

    static let grpcResponse = WireResponse(wire: .grpc)

    /// The request headers the decision reads. Found by the name's length first: a `switch` over string literals
    /// compared every header with each literal in turn, and two different strings compare slowly (Unicode rules),
    /// ~10k instructions per call.
    enum RequestField {
        case method, path, contentType, grpcTimeout, grpcEncoding, connectTimeout, contentEncoding, connectEncoding
        case connectVersion, origin, preflightMethod

        init?(_ name: String) {
            let field: RequestField?
            switch name.utf8.count {
            case 5: field = name == ":path" ? .path : nil
            case 6: field = name == "origin" ? .origin : nil
            case 7: field = name == ":method" ? .method : nil
            case 12: field = name == "content-type" ? .contentType : name == "grpc-timeout" ? .grpcTimeout : nil
            case 13: field = name == "grpc-encoding" ? .grpcEncoding : nil
            case 16: field = name == "content-encoding" ? .contentEncoding : nil
            case 18: field = name == "connect-timeout-ms" ? .connectTimeout : nil
            case 24:
                field =
                    name == "connect-content-encoding"
                    ? .connectEncoding : name == "connect-protocol-version" ? .connectVersion : nil
            case 29: field = name == "access-control-request-method" ? .preflightMethod : nil
            default: field = nil
            }
            guard let field else { return nil }
            self = field
        }
    }

    /// `http1`: the request came over HTTP/1.1, which carries only the web protocols (gRPC needs HTTP/2's
    /// trailers).
    static func decide(
        _ headers: [HTTP2Header],
        router: GRPCRouter,
        configuration: GRPCServerConfiguration,
        http1: Bool
    ) -> CallOpening {
        var method = ""
        var path = ""
        var contentType = ""
        var grpcTimeout: String?
        var grpcEncoding: String?
        // The web protocols' headers (see `WireProtocol`, `CORSPolicy`).
        var connectTimeout: String?
        var contentEncoding: String?
        var connectEncoding: String?
        var connectVersion: String?
        var origin: String?
        var preflightMethod: String?
        for header in headers {
            switch RequestField(header.name) {
            case .method: method = header.value
            case .path: path = header.value
            case .contentType: contentType = header.value
            case .grpcTimeout: grpcTimeout = header.value
            case .grpcEncoding: grpcEncoding = header.value
            case .connectTimeout: connectTimeout = header.value
            case .contentEncoding: contentEncoding = header.value
            case .connectEncoding: connectEncoding = header.value
            case .connectVersion: connectVersion = header.value
            case .origin: origin = header.value
            case .preflightMethod: preflightMethod = header.value
            case nil: break
            }
        }
        let web = configuration.web
        if method == "OPTIONS", let web {
            return .preflight(web.cors?.preflight(origin: origin, requestMethod: preflightMethod) ?? [HTTP2Header(":status", "403")])
        }
        if method == "GET", let web {
            return ConnectGet.decide(
                path: path, router: router, web: web, connectTimeout: connectTimeout, origin: origin)
        }
        guard method == "POST" else { return .http(status: "405", message: "gRPC requires POST") }
        guard let wire = WireProtocol.detect(contentType: contentType), wire == .grpc || web != nil,
            !wire.usesJSON || web?.json != nil, !(http1 && wire == .grpc)
        else {
            return .http(status: "415", message: "Unsupported content-type")
        }
        // The protocol decides the edge only: headers, framing and status encoding (`WireResponse`).
        let response =
            wire == .grpc
            ? Self.grpcResponse
            : WireResponse(wire: wire, extraHeaders: web?.cors?.responseHeaders(origin: origin) ?? [], web: web)
        if wire.isWeb, wire != .grpcWeb, let connectVersion, connectVersion != "1" {
            return .refuse(response, RPCError(.invalidArgument, "Unsupported connect-protocol-version"), unknownMethod: false)
        }
        guard let handler = router.handlers[path] else {
            return .refuse(response, RPCError(.unimplemented, "Unknown method \(path)"), unknownMethod: true)
        }
        if !wire.isFramed && !(handler.singleRequest && handler.singleResponse) {
            // Connect unary is for unary methods; streaming ones take Connect's streaming content types.
            return .http(status: "415", message: "Unsupported content-type")
        }
        let encoding: String? =
            switch wire {
            case .grpc, .grpcWeb: grpcEncoding
            case .connectUnary: contentEncoding
            case .connectStreaming: connectEncoding
            }
        if let encoding, encoding != "identity" {
            var error = RPCError(.unimplemented, "Compression \(encoding) is not supported")
            error.metadata.add(wire.encodingHeaders.accept, "identity")
            return .refuse(response, error, unknownMethod: false)
        }
        var deadline: NIODeadline?
        switch wire {
        case .grpc, .grpcWeb:
            if let grpcTimeout {
                guard let duration = GRPCTimeout.parse(grpcTimeout) else {
                    return .refuse(response, RPCError(.internalError, "Malformed grpc-timeout"), unknownMethod: false)
                }
                deadline = .now() + TimeAmount(duration)
            }
        case .connectUnary, .connectStreaming:
            if let connectTimeout {
                guard let duration = ConnectError.parseTimeout(connectTimeout) else {
                    return .refuse(response, RPCError(.invalidArgument, "Malformed connect-timeout-ms"), unknownMethod: false)
                }
                deadline = .now() + TimeAmount(duration)
            }
        }
        return .call(handler: handler, path: path, response: response, deadline: deadline)
    }
}
