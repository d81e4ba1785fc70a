// The HTTP/1.1 request path of every plain HTTP port (the gateway's media and admin ports) and of the gateway's
// gRPC port when it serves the web protocols over HTTP/1.1: a client's bytes, split into reads as the first input
// byte says, through `HTTP1Port.configure` (NIO's llhttp decoder with the 16 KiB header cap, keep-alive and
// pipelining, back-pressure; the phase deadlines are installed but read the wall clock, so test_http_ports.py and
// test_web_protocols.py test them, not this target) into a handler that answers each request as a port does, and
// each request head through `CallOpening.decide` (the gateway's reading of a web call's headers: method, content
// type, timeouts, encodings, CORS). Beyond not crashing:
// - a head that is delivered has no Content-Length beside Transfer-Encoding, at most one Content-Length value,
//   header names that are tokens, values without CR, LF or NUL, and a header block within the 16 KiB cap; a body
//   is delivered only to a request that announced one, never longer than its Content-Length, and complete when
//   the request ends; a request whose Transfer-Encoding does not end in `chunked` gets no body, never ends, and
//   is answered 400 with the connection closed;
// - parse → serialize → parse: every delivered request, written again by NIO's request encoder and read by a
//   fresh copy of the layer, comes out as the same head and body;
// - the bytes written back are well-formed HTTP/1.1 responses, one per request delivered, plus at most one error
//   answer (400, 413, 431), after which the connection is closed and no further request is delivered;
// - CallOpening: only POST opens a call, over HTTP/1.1 never in gRPC proper; an OPTIONS answer carries
//   `access-control-allow-origin` only for an allowed origin and equal to it, and never allows credentials; a
//   call's deadline is not in the past.
import CoreMetrics
import FuzzSupport
import KindredGRPCServices
import KindredHTTP2
import NIOCore
import NIOEmbedded
import NIOHTTP1

@testable import KindredGRPC

let metrics = HTTP1PortMetrics(port: "fuzz", factory: NOOPMetricsHandler.instance)
let limits = HTTP1Limits(maxConnections: 8)
let allowedOrigin = "https://app.example.com"
let callPath = "/kindred.fuzz.v1.Fuzz/Call"
let streamPath = "/kindred.fuzz.v1.Fuzz/Stream"
let configuration: GRPCServerConfiguration = {
    var configuration = GRPCServerConfiguration()
    configuration.web = WebProtocols(
        cors: CORSPolicy(allowedOrigins: [allowedOrigin]),
        json: ProtoJSONCodec(toBinary: { bytes, _ in bytes }, toJSON: { bytes, _ in bytes }))
    return configuration
}()
let router: GRPCRouter = {
    var router = GRPCRouter()
    router.handlers[callPath] = MethodHandler(singleRequest: true, singleResponse: true) { _, _ in }
    router.handlers[streamPath] = MethodHandler(singleRequest: false, singleResponse: false) { _, _ in }
    return router
}()
let tokenCharacters = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)

/// One request as the port's handler saw it.
struct Request: Equatable {
    var head: HTTPRequestHead
    var body: [UInt8] = []
    var ended = false

    /// Transfer-Encoding present but not ending in `chunked` (RFC 9112 §6.3: the length cannot be known). The
    /// decoder delivers such a head, then refuses the request: no body, no end, a 400.
    var unknownLength: Bool {
        guard let last = self.head.headers["transfer-encoding"].flatMap({ $0.split(separator: ",") }).last else { return false }
        return last.trimmingCharacters(in: .init(charactersIn: " \t")).lowercased() != "chunked"
    }
}

/// What a port's handler does with requests: records them, answers each once it ended (as the media and admin
/// ports do; the web call handler answers the same way for a refused call), closes when the client asked to.
final class Port: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    var requests: [Request] = []
    var errors = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            require(self.requests.last?.ended ?? true, "a head before the previous request ended")
            checkHead(head)
            self.requests.append(Request(head: head))
        case .body(var bytes):
            require(!self.requests.isEmpty && !self.requests[self.requests.count - 1].ended, "body outside a request")
            require(!self.requests[self.requests.count - 1].unknownLength, "a body of unknown length delivered")
            self.requests[self.requests.count - 1].body += bytes.readBytes(length: bytes.readableBytes) ?? []
            checkBodyLength(self.requests[self.requests.count - 1], ended: false)
        case .end:
            require(!self.requests.isEmpty && !self.requests[self.requests.count - 1].ended, "end outside a request")
            require(!self.requests[self.requests.count - 1].unknownLength, "a request of unknown length ended")
            self.requests[self.requests.count - 1].ended = true
            let request = self.requests[self.requests.count - 1]
            checkBodyLength(request, ended: true)
            var headers = HTTPHeaders([("content-length", "2")])
            if !request.head.isKeepAlive { headers.add(name: "connection", value: "close") }
            context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            context.write(self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "ok")))), promise: nil)
            context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
            if !request.head.isKeepAlive { context.close(promise: nil) }
        }
    }

    /// Counted, and passed on: like the media and admin ports' handlers, the port's handler does not close the
    /// connection itself (the port's layer must).
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.errors += 1
        context.fireErrorCaught(error)
    }
}

func checkHead(_ head: HTTPRequestHead) {
    let headers = head.headers
    let lengths = Set(headers["content-length"].flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .init(charactersIn: " \t")) } })
    let codings = headers["transfer-encoding"]
    require(lengths.isEmpty || codings.isEmpty, "Content-Length beside Transfer-Encoding delivered: \(headers)")
    require(lengths.count <= 1, "conflicting Content-Length values delivered: \(lengths)")
    require(lengths.allSatisfy { !$0.isEmpty && $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }, "Content-Length \(lengths)")
    var size = 0
    for (name, value) in headers {
        require(!name.isEmpty && name.utf8.allSatisfy { tokenCharacters.contains($0) }, "header name \(Array(name.utf8))")
        require(!value.utf8.contains(where: { $0 == 13 || $0 == 10 || $0 == 0 }), "header value \(Array(value.utf8))")
        size += name.utf8.count + value.utf8.count
    }
    require(size <= HTTP1Port.maxHeaderListSize, "a header block of \(size) bytes delivered")
    require(!head.uri.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }), "request target \(Array(head.uri.utf8))")
    checkCallOpening(head)
}

func checkBodyLength(_ request: Request, ended: Bool) {
    let headers = request.head.headers
    if let length = headers.first(name: "content-length").flatMap({ Int($0.split(separator: ",")[0].trimmingCharacters(in: .whitespaces)) }) {
        require(request.body.count <= length, "\(request.body.count) body bytes for Content-Length \(length)")
        if ended { require(request.body.count == length, "request ended after \(request.body.count) of \(length) bytes") }
    } else if !headers.contains(name: "transfer-encoding") {
        require(request.body.isEmpty, "a body without Content-Length or Transfer-Encoding")
    }
}

/// The gateway's reading of the head as a web call (`HTTP1CallHandler.open`).
func checkCallOpening(_ head: HTTPRequestHead) {
    var headers = [HTTP2Header(":method", head.method.rawValue), HTTP2Header(":path", head.uri)]
    for (name, value) in head.headers { headers.append(HTTP2Header(name.lowercased(), value)) }
    let before = NIODeadline.now()
    switch CallOpening.decide(headers, router: router, configuration: configuration, http1: true) {
    case .preflight(let answer):
        require(head.method == .OPTIONS, "a preflight answer to \(head.method)")
        let origins = answer.filter { $0.name == "access-control-allow-origin" }.map(\.value)
        require(origins.isEmpty || origins == [allowedOrigin] && head.headers["origin"].last == allowedOrigin,
                "allow-origin \(origins) for origin \(head.headers["origin"])")
        require(!answer.contains { $0.name == "access-control-allow-credentials" }, "credentials allowed")
    case .call(_, let path, let response, let deadline, let message):
        // A Connect GET carries its message in the URL; a POST's comes as the body.
        require(head.method == .POST && message == nil || head.method == .GET && message != nil,
                "a call opened by \(head.method)")
        require(path == callPath || path == streamPath, "a call of \(path)")
        require(response.wire != .grpc, "gRPC proper over HTTP/1.1")
        if let deadline { require(deadline >= before, "a deadline in the past") }
        let origins = response.extraHeaders.filter { $0.name == "access-control-allow-origin" }.map(\.value)
        require(origins.isEmpty || origins == [allowedOrigin], "allow-origin \(origins) on a response")
    case .refuse(let response, _, _):
        require((head.method == .POST || head.method == .GET) && response.wire != .grpc,
                "a refusal in \(response.wire) for \(head.method)")
    case .http(let status, _):
        require(status == "405" || status == "415" || status == "400" && head.method == .GET, "plain HTTP \(status)")
        require(status != "405" || head.method != .POST, "405 for POST")
    }
}

/// First in the pipeline: drops what is written after the connection was closed, as a socket does (an
/// EmbeddedChannel keeps writes that arrive while its close runs, e.g. a decoder's second error answer).
final class Wire: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    private var closed = false

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !self.closed else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        context.write(data, promise: promise)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        self.closed = true
        context.close(mode: mode, promise: promise)
    }
}

/// A connection of the port with its pipeline, fed `bytes` in the reads `sizes` gives.
func serve(_ bytes: [UInt8], reads sizes: (Int) -> Int) -> (port: Port, output: [UInt8], closed: Bool) {
    let channel = EmbeddedChannel()
    let port = Port()
    try! channel.pipeline.syncOperations.addHandler(Wire())
    try! HTTP1Port.configure(channel.pipeline.syncOperations, limits: limits, metrics: metrics)
    try! channel.pipeline.syncOperations.addHandler(port)
    try! channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    var offset = 0
    var read = 0
    while offset < bytes.count && channel.isActive {
        let size = max(1, min(bytes.count - offset, sizes(read)))
        _ = try? channel.writeInbound(ByteBuffer(bytes: bytes[offset..<offset + size]))
        offset += size
        read += 1
    }
    var output: [UInt8] = []
    while let chunk = try? channel.readOutbound(as: ByteBuffer.self) { output += chunk.readableBytesView }
    let closed = !channel.isActive
    _ = try? channel.finish(acceptAlreadyClosed: true)  // the pipeline (and its scheduled deadlines) go
    return (port, output, closed)
}

/// The responses in `bytes` (status codes), checking each is well-formed HTTP/1.1 with a Content-Length body.
func responses(in bytes: [UInt8]) -> [Int] {
    var statuses: [Int] = []
    var rest = bytes[...]
    while !rest.isEmpty {
        guard let end = rest.firstRange(of: Array("\r\n\r\n".utf8)) else {
            require(false, "a response head without its end: \(String(decoding: rest, as: UTF8.self))")
            return statuses
        }
        let lines = String(decoding: rest[..<end.lowerBound], as: UTF8.self).split(separator: "\r\n", omittingEmptySubsequences: false)
        let status = lines[0].split(separator: " ")
        require(status.count >= 2 && status[0] == "HTTP/1.1" && Int(status[1]) != nil, "status line \(lines[0])")
        var length = 0
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            require(parts.count == 2, "response header line \(line)")
            if parts[0].lowercased() == "content-length" { length = Int(parts[1].trimmingCharacters(in: .whitespaces)) ?? -1 }
            require(parts[0].lowercased() != "transfer-encoding", "a chunked answer")
        }
        require(length >= 0 && rest.count - (end.upperBound - rest.startIndex) >= length, "response body of \(length) bytes missing")
        statuses.append(Int(status[1])!)
        rest = rest[(end.upperBound + length)...]
    }
    return statuses
}

/// The request written again by a client's encoder.
func serialize(_ requests: [Request]) -> [UInt8] {
    let client = EmbeddedChannel(handler: HTTPRequestEncoder())
    for request in requests {
        var head = request.head
        // The encoder frames the body itself: as the original said, by length or chunked.
        if head.headers.contains(name: "transfer-encoding") { head.headers.replaceOrAdd(name: "transfer-encoding", value: "chunked") }
        try! client.writeOutbound(HTTPClientRequestPart.head(head))
        if !request.body.isEmpty { try! client.writeOutbound(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: request.body)))) }
        try! client.writeOutbound(HTTPClientRequestPart.end(nil))
    }
    var bytes: [UInt8] = []
    while let chunk = try? client.readOutbound(as: ByteBuffer.self) { bytes += chunk.readableBytesView }
    _ = try? client.finish(acceptAlreadyClosed: true)
    return bytes
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzHTTP1(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let split = input.byte()
    let bytes = input.rest()
    // Reads: all at once, byte by byte, or sizes cycling from the choice byte.
    let sizes: (Int) -> Int =
        switch split % 3 {
        case 0: { _ in bytes.count }
        case 1: { _ in 1 }
        default: { read in 1 + Int((split &* UInt8(truncatingIfNeeded: read &+ 7)) % 97) }
        }

    // The sniffer of the gateway's port: HTTP/1.1 unless the bytes begin as the HTTP/2 preface.
    if let choice = ProtocolSniffer.choose(bytes), choice == .http2 {
        require(bytes.starts(with: Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)), "HTTP/2 chosen without the preface")
    }

    let served = serve(bytes, reads: sizes)
    let port = served.port
    let statuses = responses(in: served.output)
    let answered = port.requests.filter(\.ended).count
    let errorAnswers = statuses.filter { [400, 413, 431].contains($0) }.count
    require(statuses.count == answered + errorAnswers, "\(statuses) answered for \(answered) requests")
    if port.requests.contains(where: \.unknownLength) {
        require(errorAnswers == 1 && served.closed, "a request of unknown length not refused: \(statuses)")
    }
    require(errorAnswers <= 1, "\(errorAnswers) error answers: \(statuses)\n\(String(decoding: served.output, as: UTF8.self))")
    if errorAnswers == 1 {
        require(statuses.last != 200, "a request answered after an error answer: \(statuses)")
        require(served.closed, "the connection stayed open after an error answer")
    }
    // Parse → serialize → parse: the requests the port saw, written by a client, read again the same.
    let complete = port.requests.filter(\.ended)
    if !complete.isEmpty {
        var reencoded = complete
        for index in reencoded.indices where !reencoded[index].head.isKeepAlive {
            // A request after one without keep-alive would not be read; compare up to it.
            reencoded = Array(reencoded[...index])
            break
        }
        let again = serve(serialize(reencoded), reads: { _ in 1 << 20 }).port
        require(again.errors == 0, "the re-serialized requests were refused")
        require(again.requests.count == reencoded.count, "\(again.requests.count) of \(reencoded.count) requests read again")
        for (first, second) in zip(reencoded, again.requests) {
            require(first.head.method == second.head.method && first.head.uri == second.head.uri
                    && first.head.version == second.head.version, "head \(first.head) read again as \(second.head)")
            let names = { (head: HTTPRequestHead) in head.headers.filter { $0.name.lowercased() != "transfer-encoding" }.map { [$0.name.lowercased(), $0.value] } }
            require(names(first.head) == names(second.head), "headers \(first.head.headers) read again as \(second.head.headers)")
            require(first.body == second.body, "a body of \(first.body.count) bytes read again as \(second.body.count)")
        }
    }
    return 0
}

runFuzzer(fuzzHTTP1)
