import KindredHTTP2
import KindredProto
import KindredProtobuf
import NIOCore
import Testing

@testable import KindredGRPC

/// The web protocols' edge without I/O: which protocol a content type names, Connect's code names and HTTP
/// statuses, its error and end-of-stream JSON, gRPC-Web's trailer frame, bare Connect unary bodies and CORS.
@Suite struct WebProtocolTests {
    @Test(arguments: [
        ("application/grpc", WireProtocol.grpc), ("application/grpc+proto", .grpc),
        ("application/grpc-web", .grpcWeb), ("application/grpc-web+proto", .grpcWeb),
        ("application/proto", .connectUnary(.proto)), ("application/json", .connectUnary(.json)),
        ("application/json; charset=utf-8", .connectUnary(.json)), ("Application/Proto", .connectUnary(.proto)),
        ("application/connect+proto", .connectStreaming(.proto)), ("application/connect+json", .connectStreaming(.json)),
    ])
    func detectsProtocol(contentType: String, wire: WireProtocol) {
        #expect(WireProtocol.detect(contentType: contentType) == wire)
    }

    @Test(arguments: ["", "text/plain", "application/grpc-web-text", "application/connect+thrift", "application/xml"])
    func refusesOtherContentTypes(contentType: String) {
        #expect(WireProtocol.detect(contentType: contentType) == nil)
    }

    /// The Connect protocol's table (connectrpc.com/docs/protocol, "Error Codes").
    @Test(arguments: [
        (StatusCode.cancelled, "canceled", 499), (.unknown, "unknown", 500), (.invalidArgument, "invalid_argument", 400),
        (.deadlineExceeded, "deadline_exceeded", 504), (.notFound, "not_found", 404),
        (.alreadyExists, "already_exists", 409), (.permissionDenied, "permission_denied", 403),
        (.resourceExhausted, "resource_exhausted", 429), (.failedPrecondition, "failed_precondition", 400),
        (.aborted, "aborted", 409), (.outOfRange, "out_of_range", 400), (.unimplemented, "unimplemented", 501),
        (.internalError, "internal", 500), (.unavailable, "unavailable", 503), (.dataLoss, "data_loss", 500),
        (.unauthenticated, "unauthenticated", 401),
    ])
    func connectCodes(code: StatusCode, name: String, httpStatus: Int) {
        #expect(ConnectError.codeName(code) == name)
        #expect(ConnectError.httpStatus(code) == httpStatus)
    }

    @Test func connectErrorJSON() {
        let error = RPCError(.notFound, "No \"such\" member\n")
        let detail = ConnectError.Detail(type: "kindred.common.v1.ErrorDetail", value: [1, 2, 3, 4], debugJSON: nil)
        let json = String(decoding: ConnectError.json(error, details: [detail]), as: UTF8.self)
        #expect(
            json == #"{"code":"not_found","message":"No \"such\" member\n","details":[{"type":"kindred.common.v1.ErrorDetail","value":"AQIDBA"}]}"#
        )
        #expect(String(decoding: ConnectError.json(RPCError(.internalError), details: []), as: UTF8.self) == #"{"code":"internal"}"#)
        let debug = ConnectError.Detail(type: "t", value: [], debugJSON: Array(#"{"reason":"X"}"#.utf8))
        #expect(
            String(decoding: ConnectError.json(RPCError(.aborted, "a\u{1}"), details: [debug]), as: UTF8.self)
                == #"{"code":"aborted","message":"a\u0001","details":[{"type":"t","value":"","debug":{"reason":"X"}}]}"#
        )
    }

    @Test func endOfStreamJSON() {
        #expect(String(decoding: ConnectError.endOfStreamJSON(nil, details: [], trailers: [:]), as: UTF8.self) == "{}")
        var trailers = Metadata()
        trailers.add("x-a", "1")
        trailers.add("x-b-bin", binary: [0xFF])
        trailers.add("x-a", "2")
        trailers.add("grpc-status", "0")  // reserved: never metadata
        let json = ConnectError.endOfStreamJSON(RPCError(.unavailable, "down"), details: [], trailers: trailers)
        #expect(
            String(decoding: json, as: UTF8.self)
                == #"{"error":{"code":"unavailable","message":"down"},"metadata":{"x-a":["1","2"],"x-b-bin":["/w"]}}"#
        )
    }

    @Test(arguments: [("0", 0), ("1500", 1500), ("9999999999", 9_999_999_999)])
    func connectTimeout(value: String, milliseconds: Int64) {
        #expect(ConnectError.parseTimeout(value) == .milliseconds(milliseconds))
    }

    @Test(arguments: ["", "-1", "1.5", "10000000000", "1s", " 1"])
    func malformedConnectTimeout(value: String) {
        #expect(ConnectError.parseTimeout(value) == nil)
    }

    @Test func grpcWebTrailerFrame() throws {
        var trailers = Metadata()
        trailers.add("x-note", "kept")
        let response = WireResponse(wire: .grpcWeb)
        let end = response.end(RPCError(.notFound, "100% gone"), trailers: trailers, allocator: ByteBufferAllocator())
        #expect(end.trailers == nil)
        var data = try #require(end.data)
        let flag = data.readInteger(as: UInt8.self)
        let length = Int(data.readInteger(as: UInt32.self) ?? 0)
        let text = data.readString(length: length)
        #expect(flag == 0x80 && data.readableBytes == 0)
        #expect(text == "grpc-status: 5\r\ngrpc-message: 100%25 gone\r\nx-note: kept\r\n")
        // Headers start the response; the status frame follows as its body even with no message.
        let whole = response.complete(nil, metadata: [:], trailers: [:], message: nil, allocator: ByteBufferAllocator())
        #expect(whole.headers == [HTTP2Header(":status", "200"), HTTP2Header("content-type", "application/grpc-web+proto")])
        #expect(Array(try #require(whole.body).readableBytesView) == [0x80, 0, 0, 0, 16] + Array("grpc-status: 0\r\n".utf8))
    }

    @Test func connectUnaryResponses() throws {
        let web = WebProtocols(errorDetails: [.init(metadataKey: "kindred-error-bin", messageType: Kindred.Common.V1.ErrorDetail.self)])
        let cors = [HTTP2Header("vary", "origin")]
        let response = WireResponse(wire: .connectUnary(.proto), extraHeaders: cors, web: web)
        var trailers = Metadata()
        trailers.add("x-t", "v")
        var message = ByteBufferAllocator().buffer(capacity: 3)
        message.writeBytes([8, 1])
        let ok = response.complete(nil, metadata: ["x-h": "h"], trailers: trailers, message: message, allocator: ByteBufferAllocator())
        #expect(
            ok.headers == [
                HTTP2Header(":status", "200"), HTTP2Header("content-type", "application/proto"), HTTP2Header("vary", "origin"),
                HTTP2Header("x-h", "h"), HTTP2Header("trailer-x-t", "v"),
            ]
        )
        #expect(ok.body == message)
        // An error: the code's HTTP status, JSON, and the ErrorDetail moved from metadata into details.
        var detail = Kindred.Common.V1.ErrorDetail()
        detail.reason = "RATE_LIMITED"
        let error = RPCError(.resourceExhausted, "Slow down", metadata: detail.metadata)
        let failed = response.complete(error, metadata: [:], trailers: [:], message: message, allocator: ByteBufferAllocator())
        #expect(failed.headers.first == HTTP2Header(":status", "429"))
        #expect(failed.headers.contains(HTTP2Header("content-type", "application/json")))
        #expect(!failed.headers.contains { $0.name.contains("kindred-error-bin") })
        let value = Base64.encode(try detail.serializedBytes(), padding: false)
        let body = String(buffer: try #require(failed.body))
        #expect(
            body == #"{"code":"resource_exhausted","message":"Slow down","details":[{"type":"kindred.common.v1.ErrorDetail","value":"\#(value)"}]}"#
        )
    }

    @Test func connectStreamingEndsWithEnvelope() throws {
        let response = WireResponse(wire: .connectStreaming(.proto))
        let end = response.end(RPCError(.deadlineExceeded, "late"), trailers: [:], allocator: ByteBufferAllocator())
        #expect(end.trailers == nil)
        var data = try #require(end.data)
        let flag = data.readInteger(as: UInt8.self)
        let length = Int(data.readInteger(as: UInt32.self) ?? 0)
        let text = data.readString(length: length)
        #expect(flag == 0x02)
        #expect(text == #"{"error":{"code":"deadline_exceeded","message":"late"}}"#)
        #expect(
            response.headers(metadata: [:]) == [HTTP2Header(":status", "200"), HTTP2Header("content-type", "application/connect+proto")]
        )
    }

    @Test func bareBodyIsOneMessage() throws {
        var inbound = InboundMessages(maxMessageSize: 8, framed: false)
        let allocator = ByteBufferAllocator()
        // A bare body is complete only at its end; its bytes go back to the window as they arrive.
        let released = try [UInt8]([1, 2, 3]).withUnsafeBytes { try inbound.receive($0, allocator: allocator) }
        #expect(released == 3 && inbound.isEmpty && !inbound.hasPartialMessage)
        _ = try [UInt8]([4]).withUnsafeBytes { try inbound.receive($0, allocator: allocator) }
        inbound.endOfUnframedBody(allocator: allocator)
        #expect(inbound.count == 1)
        #expect(Array(inbound.removeFirst().message.readableBytesView) == [1, 2, 3, 4])
        // An empty body is an empty message; a body over the limit is refused.
        var empty = InboundMessages(maxMessageSize: 8, framed: false)
        empty.endOfUnframedBody(allocator: allocator)
        #expect(empty.removeFirst().message.readableBytes == 0)
        var large = InboundMessages(maxMessageSize: 8, framed: false)
        #expect(throws: InboundMessages.ReceiveFailure.self) {
            _ = try [UInt8](repeating: 0, count: 9).withUnsafeBytes { try large.receive($0, allocator: allocator) }
        }
    }

    @Test func corsPreflight() {
        let policy = CORSPolicy(allowedOrigins: ["https://app.example"], maxAge: .seconds(600))
        let allowed = policy.preflight(origin: "https://app.example", requestMethod: "POST")
        #expect(allowed.first == HTTP2Header(":status", "204"))
        #expect(allowed.contains(HTTP2Header("access-control-allow-origin", "https://app.example")))
        #expect(allowed.contains(HTTP2Header("access-control-max-age", "600")))
        #expect(!allowed.contains { $0.name == "access-control-allow-credentials" })
        for (origin, method) in [("https://evil.example", "POST"), ("https://app.example", "PUT"), (nil, "POST")] as [(String?, String)] {
            let refused = policy.preflight(origin: origin, requestMethod: method)
            #expect(refused.first == HTTP2Header(":status", "403"))
            #expect(!refused.contains { $0.name.hasPrefix("access-control-") })
        }
        #expect(policy.responseHeaders(origin: "https://evil.example") == [HTTP2Header("vary", "origin")])
        #expect(policy.responseHeaders(origin: "https://app.example").contains(HTTP2Header("access-control-allow-origin", "https://app.example")))
        #expect(CORSPolicy(allowedOrigins: []).preflight(origin: "https://app.example", requestMethod: "POST").first == HTTP2Header(":status", "403"))
    }
}

/// The decisions HTTP/2 and HTTP/1.1 share: which protocol a connection speaks, and what a request's headers open.
@Suite struct CallOpeningTests {
    @Test(arguments: [
        ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", ProtocolSniffer.Choice?.some(.http2)),
        ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0", .http2), ("PRI * HTTP/2", nil), ("P", nil), ("", nil),
        ("POST /a HTTP/1.1\r\n", .http1), ("PO", .http1), ("GET / HTTP/1.1", .http1), ("PRI * HTTP/1.1", .http1),
    ])
    func sniffsTheProtocol(first: String, choice: ProtocolSniffer.Choice?) {
        #expect(ProtocolSniffer.choose(Array(first.utf8)) == choice)
    }

    struct Echo: GRPCService {
        func register(in router: inout GRPCRouter) {
            router.unary(Kindred.Testing.V1.InteropService.Method.echo) { request, _ in
                Kindred.Testing.V1.EchoResponse.with { $0.message = request.message }
            }
        }
    }

    private func decide(
        _ fields: [(String, String)], web: Bool = true, http1: Bool = false, getMethods: Set<String> = [],
        json: Bool = false
    ) -> CallOpening {
        var router = GRPCRouter()
        router.register(Echo())
        var configuration = GRPCServerConfiguration()
        if web {
            configuration.web = WebProtocols(
                cors: CORSPolicy(allowedOrigins: ["https://app.example"]),
                json: json ? ProtoJSONCodec(toBinary: { bytes, _ in bytes }, toJSON: { bytes, _ in bytes }) : nil,
                getMethods: getMethods)
        }
        let headers = [HTTP2Header(":method", "POST"), HTTP2Header(":path", "/kindred.testing.v1.InteropService/Echo")]
            .filter { header in !fields.contains { $0.0 == header.name } } + fields.map { HTTP2Header($0.0, $0.1) }
        return CallOpening.decide(headers, router: router, configuration: configuration, http1: http1)
    }

    @Test func opensCallsInEveryProtocol() {
        for contentType in ["application/grpc", "application/grpc-web+proto", "application/proto", "application/connect+proto"] {
            guard case .call(_, _, let response, let deadline, nil) = self.decide([("content-type", contentType)]) else {
                Issue.record("\(contentType) opened no call")
                continue
            }
            #expect(response.wire == WireProtocol.detect(contentType: contentType) && deadline == nil)
        }
        guard case .call(_, _, _, let deadline?, _) = self.decide([("content-type", "application/proto"), ("connect-timeout-ms", "5000")]) else {
            Issue.record("no deadline")
            return
        }
        #expect(deadline > .now() + .seconds(4))
    }

    @Test func refusals() {
        // Internal servers (no web protocols) speak gRPC only; HTTP/1.1 carries no gRPC; JSON needs a codec.
        if case .http(let status, _) = self.decide([("content-type", "application/proto")], web: false) { #expect(status == "415") } else { Issue.record("web served") }
        if case .http(let status, _) = self.decide([("content-type", "application/grpc")], http1: true) { #expect(status == "415") } else { Issue.record("gRPC over HTTP/1.1") }
        if case .http(let status, _) = self.decide([("content-type", "application/json")]) { #expect(status == "415") } else { Issue.record("JSON without codec") }
        if case .http(let status, _) = self.decide([(":method", "GET"), ("content-type", "application/proto")]) { #expect(status == "405") } else { Issue.record("GET served") }
        if case .refuse(_, let error, true) = self.decide([(":path", "/x.Y/Z"), ("content-type", "application/proto")]) {
            #expect(error.code == .unimplemented)
        } else {
            Issue.record("unknown method opened")
        }
        for (name, value, code) in [
            ("connect-timeout-ms", "soon", StatusCode.invalidArgument), ("connect-protocol-version", "2", .invalidArgument),
            ("content-encoding", "gzip", .unimplemented),
        ] {
            guard case .refuse(let response, let error, false) = self.decide([("content-type", "application/proto"), (name, value)]) else {
                Issue.record("\(name): \(value) accepted")
                continue
            }
            #expect(error.code == code && response.wire == .connectUnary(.proto))
        }
        if case .preflight(let answer) = self.decide([(":method", "OPTIONS"), ("origin", "https://app.example"), ("access-control-request-method", "POST")]) {
            #expect(answer.first == HTTP2Header(":status", "204"))
        } else {
            Issue.record("no preflight")
        }
    }

    // Connect GET (`ConnectGet`).

    static let echo = "/kindred.testing.v1.InteropService/Echo"

    private func get(_ query: String, getMethods: Set<String> = [Self.echo], path: String = Self.echo) -> CallOpening {
        self.decide([(":method", "GET"), (":path", "\(path)?\(query)")], getMethods: getMethods, json: true)
    }

    @Test(arguments: [
        ("encoding=proto&message=%0A%02hi", WireProtocol.ConnectCodec.proto, [0x0A, 0x02, 0x68, 0x69] as [UInt8]),
        ("connect=v1&encoding=proto&base64=1&message=CgJoaQ", .proto, [0x0A, 0x02, 0x68, 0x69]),
        ("encoding=proto&base64=1&message=CgJoaQ%3D%3D&cachebust=7", .proto, [0x0A, 0x02, 0x68, 0x69]),
        ("encoding=json&message=%7B%22message%22%3A+%22a+b%22%7D", .json, Array(#"{"message": "a b"}"#.utf8)),
        ("encoding=json", .json, []),
    ])
    func getOpensASideEffectFreeCall(query: String, codec: WireProtocol.ConnectCodec, message: [UInt8]) {
        guard case .call(_, let path, let response, nil, let carried?) = self.get(query) else {
            Issue.record("\(query) opened no call")
            return
        }
        #expect(path == Self.echo && response.wire == .connectUnary(codec) && carried == message)
    }

    @Test func getRefusals() {
        // Not marked side-effect free: 405 whatever the query; no or an unknown encoding: 415; a bad escape: 400.
        if case .http(let status, _) = self.get("encoding=proto&message=", getMethods: []) { #expect(status == "405") } else { Issue.record("unmarked GET served") }
        if case .http(let status, _) = self.get("message=") { #expect(status == "415") } else { Issue.record("no encoding") }
        if case .http(let status, _) = self.get("encoding=xml") { #expect(status == "415") } else { Issue.record("xml") }
        if case .http(let status, _) = self.get("encoding=proto&message=%zz") { #expect(status == "400") } else { Issue.record("bad escape") }
        for (query, code) in [
            ("connect=v2&encoding=proto", StatusCode.invalidArgument), ("encoding=proto&base64=1&message=%21%21", .invalidArgument),
            ("encoding=proto&compression=gzip", .unimplemented),
        ] {
            guard case .refuse(let response, let error, false) = self.get(query) else {
                Issue.record("\(query) accepted")
                continue
            }
            #expect(error.code == code && response.wire == .connectUnary(.proto))
        }
        if case .refuse(_, let error, true) = self.get("encoding=json", path: "/x.Y/Z") { #expect(error.code == .unimplemented) } else { Issue.record("unknown method opened") }
        // A preflight for a GET passes for an allowed origin.
        if case .preflight(let answer) = self.decide([(":method", "OPTIONS"), ("origin", "https://app.example"), ("access-control-request-method", "GET")]) {
            #expect(answer.first == HTTP2Header(":status", "204"))
        } else {
            Issue.record("no preflight")
        }
    }

    @Test func plainRefusalsCarryTheMappedGRPCStatus() {
        #expect(GRPCHTTPStatus.code("405") == .unknown && GRPCHTTPStatus.code("415") == .unknown)
        #expect(GRPCHTTPStatus.code("404") == .unimplemented && GRPCHTTPStatus.code("503") == .unavailable)
        #expect(GRPCHTTPStatus.code("400") == .internalError && GRPCHTTPStatus.code("401") == .unauthenticated)
    }
}
