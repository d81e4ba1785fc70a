import KindredHTTP2
import Logging
import NIOCore
import NIOHTTP1

/// Serves the web protocols (gRPC-Web and Connect) on an HTTP/1.1 connection, through the same router,
/// `CallOpening` decision, `ServerCall` and `WireResponse` as HTTP/2: one call at a time (NIO's server pipeline
/// holds a pipelined request until the previous response has ended). A single-request call's body (at most
/// `maxReceiveMessageSize`) is read whole before its handler starts; a client stream's handler starts at the head
/// and reads messages as they arrive (reading stops while a message limit's worth waits unread). Responses
/// without a known length are chunked. The HTTP/1.1 layer in front of it (decoder, header and body deadlines, keep-alive) is the one every
/// plain HTTP port shares (`WebProtocols.http1`). Runs on the connection's event loop.
final class HTTP1CallHandler: ChannelDuplexHandler, ServerCallConnection {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = Never
    typealias OutboundOut = HTTPServerResponsePart

    private let router: GRPCRouter
    private let configuration: GRPCServerConfiguration
    private let logger: Logger
    private let metrics: ServerMetrics
    private var context: ChannelHandlerContext?
    private var executor: EventLoopTaskExecutor?
    private var peer = "unknown"

    /// The call of the request being read or answered.
    private var call: ServerCall?
    /// The answer to a request that opens no call, sent once its body has been read (and dropped).
    private var refusal: (headers: [HTTP2Header], body: ByteBuffer?)?
    private var droppedBytes = 0
    /// Whether the connection may carry another request after this one.
    private var keepAlive = true
    private var requests: Int32 = 0
    private var writerWaiting: CheckedContinuation<Void, any Error>?
    private var shuttingDown = false

    init(router: GRPCRouter, configuration: GRPCServerConfiguration, logger: Logger, metrics: ServerMetrics) {
        self.router = router
        self.configuration = configuration
        self.logger = logger
        self.metrics = metrics
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.executor = EventLoopTaskExecutor(context.eventLoop)
        if let address = context.channel.remoteAddress {
            self.peer = "\(address.ipAddress ?? "unix"):\(address.port ?? 0)"
        }
        self.metrics.connectionOpened()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let call = self.call {
            self.call = nil
            _ = call.state.streamClosed()
            self.cancel(call)
        }
        self.writerWaiting?.resume(throwing: CancellationError())
        self.writerWaiting = nil
        self.metrics.connectionClosed()
        self.context = nil
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, let writer = self.writerWaiting {
            self.writerWaiting = nil
            writer.resume()
        }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ServerShutdownEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        // Graceful shutdown: a call in progress is answered (with `Connection: close`), an idle connection closes.
        self.shuttingDown = true
        self.keepAlive = false
        if self.call == nil && self.refusal == nil { context.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.logger.debug("HTTP/1.1 connection error", metadata: ["error": "\(error)", "net.peer": "\(self.peer)"])
        context.close(promise: nil)
    }

    // MARK: Requests

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head): self.open(head, context: context)
        case .body(let bytes): self.receive(bytes)
        case .end: self.requestEnded()
        }
    }

    private func open(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        self.keepAlive = head.isKeepAlive && !self.shuttingDown
        self.droppedBytes = 0
        var headers = [HTTP2Header(":method", head.method.rawValue), HTTP2Header(":path", head.uri)]
        headers.reserveCapacity(head.headers.count + 2)
        for (name, value) in head.headers { headers.append(HTTP2Header(name.lowercased(), value)) }
        switch CallOpening.decide(headers, router: self.router, configuration: self.configuration, http1: true) {
        case .call(let handler, let path, let response, let deadline, let message):
            self.requests &+= 1
            let call = ServerCall(
                streamID: self.requests,
                path: path,
                requestHeaders: headers,
                deadline: deadline,
                response: response,
                peer: self.peer,
                eventLoop: context.eventLoop,
                handler: handler,
                connection: self,
                metrics: self.metrics,
                maxMessageSize: self.configuration.maxReceiveMessageSize,
                callerTrace: self.configuration.callerTrace
            )
            self.call = call
            call.opened(now: .now())
            if !handler.singleRequest, let executor = self.executor {
                // A client stream (a browser sends it whole): the handler reads the messages as they arrive.
                call.start(firstMessage: nil, executor: executor, logger: self.logger)
            }
            // A Connect GET's message is in its URL: it is the body.
            if let message { self.receive(ByteBuffer(bytes: message)) }
        case .preflight(let answer):
            self.refusal = (answer, nil)
        case .http(let status, let message):
            var body = context.channel.allocator.buffer(capacity: message.utf8.count)
            body.writeString(message)
            self.refusal = ([HTTP2Header(":status", status), HTTP2Header("content-type", "text/plain")], body)
        case .refuse(let response, let error, let unknownMethod):
            if unknownMethod { self.metrics.callFinished(path: "unknown", code: error.code, start: nil) }
            self.refusal = response.complete(error, metadata: [:], trailers: [:], message: nil, allocator: context.channel.allocator)
        }
    }

    private func receive(_ bytes: ByteBuffer) {
        guard let call = self.call else {
            // The body of a refused request is read and dropped, up to the message limit; past it the connection
            // is answered and closed.
            self.droppedBytes += bytes.readableBytes
            if self.refusal != nil, self.droppedBytes > self.configuration.maxReceiveMessageSize {
                self.keepAlive = false
                self.sendRefusal()
            }
            return
        }
        guard !call.state.isFinished else { return }
        do {
            _ = try bytes.withUnsafeReadableBytes { raw in try call.inbound.receive(raw, allocator: call.allocator) }
            if !call.handler.singleRequest {
                self.deliver(call)
                // Backpressure: while the handler has a full message limit's worth unread, read no more.
                if call.inbound.queuedBytes > self.configuration.maxReceiveMessageSize {
                    self.setReading(false)
                }
            }
        } catch let error as InboundMessages.ReceiveFailure {
            // The rest of the body is not read: the connection cannot carry another request.
            self.keepAlive = false
            self.finish(call, error: error.rpcError)
            self.cancel(call)
        } catch {
            preconditionFailure("InboundMessages.receive throws only ReceiveFailure")
        }
    }

    private func requestEnded() {
        if self.refusal != nil {
            self.sendRefusal()
            return
        }
        guard let call = self.call, call.state.requestEnd(), !call.state.isFinished else { return }
        if !call.handler.singleRequest {
            if call.inbound.hasPartialMessage {
                self.finish(call, error: RPCError(.internalError, "The request ended inside a message"))
                self.cancel(call)
            } else {
                self.deliver(call)
            }
            return
        }
        if !call.wire.isFramed { call.inbound.endOfUnframedBody(allocator: call.allocator) }
        guard !call.inbound.hasPartialMessage else {
            self.finish(call, error: RPCError(.internalError, "The request ended inside a message"))
            self.cancel(call)
            return
        }
        guard call.inbound.count == 1, let executor = self.executor else {
            let message = call.inbound.isEmpty ? "The request has no message" : "Too many request messages"
            self.finish(call, error: RPCError(.internalError, message))
            return
        }
        let (message, _) = call.inbound.removeFirst()
        call.start(firstMessage: message, executor: executor, logger: self.logger)
    }

    private func sendRefusal() {
        guard let refusal = self.refusal else { return }
        self.refusal = nil
        self.writeResponse(headers: refusal.headers, body: refusal.body ?? ByteBuffer(), streaming: false)
        self.endResponse()
    }

    // MARK: Responses (ServerCallConnection)

    func sendMessage(_ encoded: ByteBuffer, on call: ServerCall) {
        guard call === self.call, let context = self.context else { return }
        if !call.wire.isFramed {
            // Connect unary: the message goes out with the status.
            if !call.state.isFinished { call.unaryResponse = encoded }
            return
        }
        switch call.state.sendMessage() {
        case .drop:
            return
        case .sendHeadersAndMessage:
            self.writeResponse(headers: call.response.headers(metadata: call.responseMetadata), body: nil, streaming: true)
        case .sendMessage:
            break
        }
        context.writeAndFlush(self.wrapOutboundOut(.body(.byteBuffer(encoded))), promise: nil)
    }

    func finish(_ call: ServerCall, error: RPCError?) {
        let send = call.finishing(error, accessLogLevel: self.configuration.accessLogLevel, logger: self.logger)
        guard send != .alreadyFinished, send != .record, call === self.call, let context = self.context else { return }
        // Answered before the request's end: the rest of its body is not read, so the connection closes after.
        if !call.state.requestEnded { self.keepAlive = false }
        if send == .sendTrailers {
            let end = call.responseEnd(error)
            if let data = end.data { context.write(self.wrapOutboundOut(.body(.byteBuffer(data))), promise: nil) }
        } else {
            let whole = call.wholeResponse(error)
            self.writeResponse(headers: whole.headers, body: whole.body ?? ByteBuffer(), streaming: false)
        }
        self.call = nil
        self.endResponse()
    }

    func handlerFinished(_ call: ServerCall) {
        _ = call.state.handlerReturned()
        call.connection = nil
    }

    func read(on call: ServerCall, continuation: CheckedContinuation<ByteBuffer?, any Error>) {
        if call.state.isCancelled {
            continuation.resume(throwing: CancellationError())
            return
        }
        precondition(call.readerWaiting == nil, "RequestStream iterated concurrently")
        call.readerWaiting = continuation
        self.deliver(call)
    }

    /// Hands the waiting reader the next message, or nil once the request has ended.
    private func deliver(_ call: ServerCall) {
        guard let reader = call.readerWaiting else { return }
        if !call.inbound.isEmpty {
            call.readerWaiting = nil
            let (message, _) = call.inbound.removeFirst()
            if call.inbound.queuedBytes <= self.configuration.maxReceiveMessageSize / 2 { self.setReading(true) }
            reader.resume(returning: message)
        } else if call.state.requestEnded {
            call.readerWaiting = nil
            reader.resume(returning: nil)
        }
    }

    private func setReading(_ on: Bool) {
        guard let channel = self.context?.channel else { return }
        try? channel.syncOptions?.setOption(ChannelOptions.autoRead, value: on)
        if on { channel.read() }
    }

    func waitUntilWritable(_ call: ServerCall, continuation: CheckedContinuation<Void, any Error>) {
        guard !call.state.isCancelled, let context = self.context else {
            continuation.resume(throwing: CancellationError())
            return
        }
        if context.channel.isWritable {
            continuation.resume()
        } else {
            self.writerWaiting = continuation
        }
    }

    func admitNow(_ call: ServerCall) -> Bool { true }

    func askAdmission(_ call: ServerCall, continuation: CheckedContinuation<Bool, any Error>) {
        continuation.resume(returning: true)
    }

    // MARK: Writing

    /// Writes a response head from HTTP/2-style headers (`:status` first): with the body's length when it is
    /// known (`body` is the whole body, written here), chunked when messages follow.
    private func writeResponse(headers: [HTTP2Header], body: ByteBuffer?, streaming: Bool) {
        guard let context = self.context else { return }
        var status = 200
        var fields = HTTPHeaders()
        for header in headers {
            if header.name == ":status" {
                status = Int(header.value) ?? 500
            } else {
                fields.add(name: header.name, value: header.value)
            }
        }
        if streaming {
            fields.add(name: "transfer-encoding", value: "chunked")
        } else {
            fields.add(name: "content-length", value: String(body?.readableBytes ?? 0))
        }
        if !self.keepAlive { fields.add(name: "connection", value: "close") }
        let head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: status), headers: fields)
        context.write(self.wrapOutboundOut(.head(head)), promise: nil)
        if let body, body.readableBytes > 0 {
            context.write(self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
    }

    /// Ends the response; closes the connection after it unless it is kept alive. NIO's pipeline may hand over a
    /// pipelined next request during this write, so the call's state is reset before.
    private func endResponse() {
        guard let context = self.context else { return }
        let keepAlive = self.keepAlive
        let written = context.writeAndFlush(self.wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            written.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    // MARK: Ending calls

    func deadlineExceeded(_ call: ServerCall) {
        guard !call.state.isFinished else { return }
        self.finish(call, error: RPCError(.deadlineExceeded, "Deadline exceeded"))
        self.cancel(call)
    }

    /// Stops the call's handler; a call without status ends CANCELLED.
    private func cancel(_ call: ServerCall) {
        guard call.cancelling() != nil else { return }
        self.setReading(true)
    }
}
