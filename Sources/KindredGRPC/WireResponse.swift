import KindredHTTP2
import KindredProtobuf
import NIOCore

/// How one call's response looks on the wire for its protocol (see `WireProtocol`): the headers that start it,
/// how the status ends it, and the whole response when the status is all there is (or, for Connect unary, when
/// the one message waits for the status). Pure values: the connection submits what these return.
struct WireResponse {
    let wire: WireProtocol
    /// CORS headers for the caller's origin, added to every response header block (empty when none apply).
    let extraHeaders: [HTTP2Header]
    let web: WebProtocols?

    init(wire: WireProtocol, extraHeaders: [HTTP2Header] = [], web: WebProtocols? = nil) {
        self.wire = wire
        self.extraHeaders = extraHeaders
        self.web = web
    }

    static let grpcHeaders = [HTTP2Header(":status", "200"), HTTP2Header("content-type", "application/grpc")]
    private static let okTrailers = [HTTP2Header("grpc-status", "0")]

    /// The headers that start a response whose messages follow (everything but Connect unary, which sends its
    /// headers with the status).
    func headers(metadata: Metadata) -> [HTTP2Header] {
        if self.wire == .grpc && self.extraHeaders.isEmpty && metadata.isEmpty { return Self.grpcHeaders }
        var headers = [HTTP2Header(":status", "200"), HTTP2Header("content-type", self.wire.responseContentType)]
        headers.append(contentsOf: self.extraHeaders)
        metadata.appendHeaders(to: &headers)
        return headers
    }

    /// How the status goes out after the response headers: gRPC as HTTP/2 trailers; gRPC-Web and Connect
    /// streaming as a last DATA frame (trailers nil: END_STREAM on that DATA).
    func end(_ error: RPCError?, trailers: Metadata, allocator: ByteBufferAllocator) -> (data: ByteBuffer?, trailers: [HTTP2Header]?) {
        switch self.wire {
        case .grpc:
            var headers = Self.grpcStatusHeaders(error)
            if !trailers.isEmpty { trailers.appendHeaders(to: &headers) }
            return (nil, headers)
        case .grpcWeb:
            return (self.grpcWebTrailerFrame(error, trailers: trailers, allocator: allocator), nil)
        case .connectStreaming:
            return (self.connectEndOfStream(error, trailers: trailers, allocator: allocator), nil)
        case .connectUnary:
            preconditionFailure("Connect unary responses are sent whole (complete)")
        }
    }

    /// The whole response when no header was sent yet: the headers and, unless they end the stream, one body.
    /// `message` is Connect unary's response message, held until the status was known.
    func complete(
        _ error: RPCError?,
        metadata: Metadata,
        trailers: Metadata,
        message: ByteBuffer?,
        allocator: ByteBufferAllocator
    ) -> (headers: [HTTP2Header], body: ByteBuffer?) {
        switch self.wire {
        case .grpc:
            // Trailers-only.
            var headers = self.headers(metadata: metadata)
            headers.append(contentsOf: Self.grpcStatusHeaders(error))
            if !trailers.isEmpty { trailers.appendHeaders(to: &headers) }
            return (headers, nil)
        case .grpcWeb, .connectStreaming:
            // Headers, then the status frame (a browser's gRPC-Web client reads the status from the body).
            let (data, _) = self.end(error, trailers: trailers, allocator: allocator)
            return (self.headers(metadata: metadata), data)
        case .connectUnary:
            return self.connectUnary(error, metadata: metadata, trailers: trailers, message: message, allocator: allocator)
        }
    }

    // MARK: gRPC

    static func grpcStatusHeaders(_ error: RPCError?) -> [HTTP2Header] {
        guard let error else { return Self.okTrailers }
        var headers = [HTTP2Header("grpc-status", String(error.code.rawValue))]
        if !error.message.isEmpty {
            headers.append(HTTP2Header("grpc-message", PercentEncoding.encode(error.message)))
        }
        if let details = error.details {
            headers.append(HTTP2Header("grpc-status-details-bin", Base64.encode(details, padding: false)))
        }
        error.metadata.appendHeaders(to: &headers)
        return headers
    }

    // MARK: gRPC-Web

    /// The trailers as a length-prefixed frame with flag 0x80, its body HTTP/1 header lines (`name: value\r\n`).
    private func grpcWebTrailerFrame(_ error: RPCError?, trailers: Metadata, allocator: ByteBufferAllocator) -> ByteBuffer {
        var fields = Self.grpcStatusHeaders(error)
        trailers.appendHeaders(to: &fields)
        var body: [UInt8] = []
        for field in fields {
            body.append(contentsOf: field.name.utf8)
            body.append(contentsOf: ": ".utf8)
            body.append(contentsOf: field.value.utf8)
            body.append(contentsOf: "\r\n".utf8)
        }
        return Self.frame(flag: 0x80, body, allocator: allocator)
    }

    // MARK: Connect

    /// The end-of-stream envelope (flag 0x02): the status and trailers as JSON.
    private func connectEndOfStream(_ error: RPCError?, trailers: Metadata, allocator: ByteBufferAllocator) -> ByteBuffer {
        let (details, kept) = self.connectDetails(error, trailers: trailers)
        let json = ConnectError.endOfStreamJSON(error, details: details, trailers: kept)
        return Self.frame(flag: 0x02, json, allocator: allocator)
    }

    private func connectUnary(
        _ error: RPCError?,
        metadata: Metadata,
        trailers: Metadata,
        message: ByteBuffer?,
        allocator: ByteBufferAllocator
    ) -> (headers: [HTTP2Header], body: ByteBuffer?) {
        let (details, kept) = self.connectDetails(error, trailers: trailers)
        let status = error.map { ConnectError.httpStatus($0.code) } ?? 200
        let contentType = error == nil ? self.wire.responseContentType : "application/json"
        var headers = [HTTP2Header(":status", String(status)), HTTP2Header("content-type", contentType)]
        headers.append(contentsOf: self.extraHeaders)
        metadata.appendHeaders(to: &headers)
        // Unary Connect has no trailers: they travel as headers prefixed `trailer-`.
        var prefixed: [HTTP2Header] = []
        kept.appendHeaders(to: &prefixed)
        for header in prefixed {
            // The accepted encodings (after a refused one) are the protocol's own header.
            let name = header.name == self.wire.encodingHeaders.accept ? header.name : "trailer-" + header.name
            headers.append(HTTP2Header(name, header.value))
        }
        guard let error else {
            return (headers, message ?? allocator.buffer(capacity: 0))
        }
        let json = ConnectError.json(error, details: details)
        var body = allocator.buffer(capacity: json.count)
        body.writeBytes(json)
        return (headers, body)
    }

    /// The error's configured detail metadata as Connect details, and the trailers left without them (the error's
    /// own metadata included: gRPC sends it with the status).
    private func connectDetails(_ error: RPCError?, trailers: Metadata) -> ([ConnectError.Detail], Metadata) {
        var all = trailers
        if let error { for entry in error.metadata { all.add(entry.key, entry.value) } }
        guard error != nil, let web = self.web, !web.errorDetails.isEmpty else { return ([], all) }
        var details: [ConnectError.Detail] = []
        var kept = Metadata()
        for entry in all {
            if case .binary(let bytes) = entry.value,
                let mapping = web.errorDetails.first(where: { $0.metadataKey == entry.key })
            {
                let debug = web.json.flatMap { try? $0.toJSON(bytes, mapping.messageType) }
                details.append(ConnectError.Detail(type: mapping.messageType.protoMessageName, value: bytes, debugJSON: debug))
            } else {
                kept.add(entry.key, entry.value)
            }
        }
        return (details, kept)
    }

    /// A length-prefixed frame: flag byte, 4-byte big-endian length, body.
    static func frame(flag: UInt8, _ body: [UInt8], allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: MessageFraming.headerSize + body.count)
        buffer.writeInteger(flag)
        buffer.writeInteger(UInt32(body.count))
        buffer.writeBytes(body)
        return buffer
    }
}
