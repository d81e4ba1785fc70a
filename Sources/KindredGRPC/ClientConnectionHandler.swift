import KindredHTTP2
import KindredProtobuf
import Logging
import NIOCore

/// The client side of one HTTP/2 connection: its nghttp2 session and the calls on it, on its event loop.
final class ClientConnectionHandler: ChannelInboundHandler, HTTP2SessionDelegate {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let configuration: GRPCClientConfiguration
    private let scheme: String
    private let logger: Logger
    private var session: HTTP2Session?
    private var context: ChannelHandlerContext?
    private var calls: [Int32: ClientCall] = [:]
    /// Plain HTTP/2 requests (`HTTP2Client`) on the same connection.
    private var exchanges: [Int32: HTTP2Exchange] = [:]
    private var inRead = false
    private var flushScheduled = false
    /// Set once GOAWAY arrived or the channel closed: no new calls go here.
    private(set) var isDraining = false
    private(set) var isClosed = false
    /// Called on the loop when the connection stops taking new calls (GOAWAY or close).
    var onDrain: (() -> Void)?
    /// Called on the loop with the peer's SETTINGS_MAX_CONCURRENT_STREAMS when it arrives (`first` for the
    /// SETTINGS of the handshake: the connection is ready) and whenever it changes.
    var onPeerStreamLimit: ((_ limit: Int, _ first: Bool) -> Void)?
    /// Called on the loop when a call `start` accepted has ended and holds no stream slot any more (not for the
    /// calls a closing connection ends: `onDrain` already took the whole connection out of use).
    var onCallEnded: (() -> Void)?
    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS; nil until its first SETTINGS arrived.
    private(set) var peerStreamLimit: Int?
    /// The client is closing: close once the last call is done.
    private var closeRequested = false
    /// The last stream id of the peer's GOAWAY: streams above it were never processed.
    private var goAwayLastStreamID: Int32?

    init(configuration: GRPCClientConfiguration, logger: Logger) {
        self.configuration = configuration
        self.scheme = configuration.tls == nil ? "http" : "https"
        self.logger = logger
    }

    var activeCalls: Int { self.calls.count + self.exchanges.count }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        do {
            let session = try HTTP2Session(role: .client, configuration: self.configuration.http2)
            session.delegate = self
            self.session = session
        } catch {
            self.logger.error("HTTP/2 session setup failed", metadata: ["error": "\(error)"])
            context.close(promise: nil)
        }
        if context.channel.isActive { self.flushOutput() }
    }

    func channelActive(context: ChannelHandlerContext) {
        self.flushOutput()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let session = self.session else { return }
        self.inRead = true
        defer { self.inRead = false }
        do {
            try session.receive(self.unwrapInboundIn(data))
        } catch {
            self.logger.debug("Closing client connection after HTTP/2 error", metadata: ["error": "\(error)"])
            self.flushOutput()
            context.close(promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.flushOutput()
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.tearDown()
        context.fireChannelInactive()
    }

    /// A channel that never became active (its connect was refused or timed out) gets no `channelInactive`, only
    /// this: the handler, its context and its nghttp2 session hold each other and would outlive the channel.
    func handlerRemoved(context: ChannelHandlerContext) {
        self.tearDown()
    }

    /// Ends the calls still on the connection and lets go of the session, the context and the pool's callbacks.
    private func tearDown() {
        guard !self.isClosed else { return }
        self.isClosed = true
        self.isDraining = true
        // The pool first: the slots of the calls ended below go with the connection.
        self.onDrain?()
        self.onDrain = nil
        self.onCallEnded = nil
        self.onPeerStreamLimit = nil
        let calls = self.calls
        self.calls.removeAll()
        for call in calls.values {
            let unprocessed = self.goAwayLastStreamID.map { call.streamID > $0 } ?? false
            call.retry = unprocessed ? .unprocessed : .interrupted
            call.complete(RPCError(.unavailable, "The connection to the server was lost"))
            call.connection = nil
        }
        let exchanges = self.exchanges
        self.exchanges.removeAll()
        for exchange in exchanges.values {
            exchange.complete(.failure(RPCError(.unavailable, "The connection to the server was lost")))
            exchange.connection = nil
        }
        self.session?.delegate = nil
        self.session = nil
        self.context = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.logger.debug("Client connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    // MARK: Output

    private func flushOutput() {
        guard let session = self.session, let context = self.context else { return }
        do {
            try session.flush(to: context)
        } catch {
            self.logger.debug("HTTP/2 session failed", metadata: ["error": "\(error)"])
            context.close(promise: nil)
        }
    }

    private func scheduleFlush() {
        guard !self.inRead, !self.flushScheduled, let context = self.context else { return }
        self.flushScheduled = true
        context.eventLoop.assumeIsolated().execute { [self] in
            self.flushScheduled = false
            self.flushOutput()
        }
    }

    // MARK: Calls (on the loop)

    /// Opens the call's stream. Returns false, touching nothing, when this connection no longer takes calls
    /// (GOAWAY received or closed): nothing was sent, so the pool retries the call on another connection.
    /// Every other failure completes the call with its status and returns true.
    func start(_ call: ClientCall, path: String, metadata: Metadata, deadline: NIODeadline?) -> Bool {
        guard let session = self.session, let context = self.context, !self.isDraining else {
            return false
        }
        var headers = [
            HTTP2Header(":method", "POST"), HTTP2Header(":scheme", self.scheme), HTTP2Header(":path", path),
            HTTP2Header(":authority", self.configuration.authority), HTTP2Header("content-type", "application/grpc"),
            HTTP2Header("te", "trailers"), HTTP2Header("user-agent", "kindred-grpc/1"),
        ]
        if let deadline {
            let remaining = deadline - .now()
            guard remaining.nanoseconds > 0 else {
                call.complete(RPCError(.deadlineExceeded, "Deadline exceeded before the call started"))
                self.onCallEnded?()
                return true
            }
            headers.append(
                HTTP2Header("grpc-timeout", GRPCTimeout.format(.nanoseconds(remaining.nanoseconds)), indexed: false))
        }
        metadata.appendHeaders(to: &headers)
        let streamID: Int32
        do {
            streamID = try session.submitRequest(headers: headers)
        } catch {
            call.complete(RPCError(.unavailable, "The connection cannot open more streams"))
            self.onCallEnded?()
            return true
        }
        call.streamID = streamID
        call.connection = self
        self.calls[streamID] = call
        if let deadline {
            call.deadlineTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
                call.deadlineTimer = nil
                self.cancel(call, RPCError(.deadlineExceeded, "Deadline exceeded"))
            }
        }
        self.scheduleFlush()
        return true
    }

    /// A unary call in one step on the loop: opens the stream, queues the framed request and ends it; `waiter` is
    /// resumed when the call completes, or at once with nil when this connection takes no new stream.
    func startUnary(
        _ call: ClientCall,
        path: String,
        metadata: Metadata,
        deadline: NIODeadline?,
        request: ByteBuffer,
        waiter: UnsafeContinuation<ClientCall.UnaryOutcome?, Never>
    ) {
        if let status = call.status {
            // Cancelled before it reached the loop: nothing was sent, the slot goes back.
            waiter.resume(returning: ClientCall.UnaryOutcome(message: nil, metadata: [:], status: status))
            self.onCallEnded?()
            return
        }
        call.unaryWaiter = waiter
        guard self.start(call, path: path, metadata: metadata, deadline: deadline) else {
            call.unaryWaiter = nil
            waiter.resume(returning: nil)
            return
        }
        // `start` completes (and so resumes) a call it could not open.
        guard !call.done, let session = self.session else { return }
        session.sendData(streamID: call.streamID, request)
        call.requestEnded = true
        session.finish(streamID: call.streamID, trailers: nil)
    }

    func send(_ framed: ByteBuffer, on call: ClientCall) {
        guard !call.done, let session = self.session else { return }
        session.sendData(streamID: call.streamID, framed)
        self.scheduleFlush()
    }

    func end(_ call: ClientCall) {
        guard !call.done, !call.requestEnded, let session = self.session else { return }
        call.requestEnded = true
        session.finish(streamID: call.streamID, trailers: nil)
        self.scheduleFlush()
    }

    func waitUntilWritable(_ call: ClientCall, continuation: CheckedContinuation<Void, any Error>) {
        let pending = self.session?.pendingOutboundBytes(streamID: call.streamID) ?? 0
        if pending <= self.configuration.outboundHighWatermark {
            continuation.resume()
        } else {
            call.writerWaiter = continuation
        }
    }

    func cancel(_ call: ClientCall, _ error: RPCError) {
        guard !call.done else { return }
        self.session?.resetStream(streamID: call.streamID, errorCode: .cancel)
        self.calls.removeValue(forKey: call.streamID)
        call.complete(error)
        call.connection = nil
        self.scheduleFlush()
        self.onCallEnded?()
        self.closeIfDone()
    }

    /// Opens a plain request's stream and queues its body, like `start(_:path:metadata:deadline:)` for a call:
    /// false, touching nothing, when this connection no longer takes streams.
    func start(_ exchange: HTTP2Exchange, deadline: NIODeadline?) -> Bool {
        guard let session = self.session, let context = self.context, !self.isDraining else {
            return false
        }
        if let deadline, (deadline - .now()).nanoseconds <= 0 {
            exchange.complete(.failure(RPCError(.deadlineExceeded, "Deadline exceeded before the request started")))
            self.onCallEnded?()
            return true
        }
        let request = exchange.request
        var headers = [
            HTTP2Header(":method", request.method), HTTP2Header(":scheme", self.scheme),
            HTTP2Header(":path", request.path), HTTP2Header(":authority", self.configuration.authority),
        ]
        headers += request.headers
        if !request.body.isEmpty || request.method == "POST" || request.method == "PUT" {
            headers.append(HTTP2Header("content-length", String(request.body.count)))
        }
        let streamID: Int32
        do {
            streamID = try session.submitRequest(headers: headers)
        } catch {
            exchange.complete(.failure(RPCError(.unavailable, "The connection cannot open more streams")))
            self.onCallEnded?()
            return true
        }
        exchange.streamID = streamID
        exchange.connection = self
        self.exchanges[streamID] = exchange
        if !request.body.isEmpty {
            session.sendData(streamID: streamID, context.channel.allocator.buffer(bytes: request.body))
        }
        session.finish(streamID: streamID, trailers: nil)
        if let deadline {
            exchange.deadlineTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
                exchange.deadlineTimer = nil
                self.cancel(exchange, RPCError(.deadlineExceeded, "Deadline exceeded"))
            }
        }
        self.scheduleFlush()
        return true
    }

    func cancel(_ exchange: HTTP2Exchange, _ error: RPCError) {
        guard !exchange.done else { return }
        self.session?.resetStream(streamID: exchange.streamID, errorCode: .cancel)
        self.endExchange(exchange, .failure(error))
    }

    /// Completes an exchange and gives its stream slot back. A response that ended while our request was still
    /// being sent closes our side too (RST_STREAM NO_ERROR, RFC 9113 §8.1), so the stream holds no slot.
    private func endExchange(_ exchange: HTTP2Exchange, _ result: Result<HTTP2Response, RPCError>) {
        self.exchanges.removeValue(forKey: exchange.streamID)
        if case .success = result, let session = self.session, session.pendingOutboundBytes(streamID: exchange.streamID) > 0 {
            session.resetStream(streamID: exchange.streamID, errorCode: .noError)
        }
        exchange.complete(result)
        exchange.connection = nil
        self.scheduleFlush()
        self.onCallEnded?()
        self.closeIfDone()
    }

    /// Returns a read (or dropped) message's bytes to the flow-control window.
    func release(_ call: ClientCall, count: Int) {
        self.session?.consume(streamID: call.streamID, count: count)
        self.scheduleFlush()
    }

    // MARK: HTTP/2 events

    func http2Session(_ session: HTTP2Session, didReceiveHeaders headers: [HTTP2Header], streamID: Int32, endStream: Bool) {
        if let exchange = self.exchanges[streamID] {
            if !exchange.receiveHeaders(headers) {
                session.resetStream(streamID: streamID, errorCode: .protocolError)
                self.endExchange(exchange, .failure(RPCError(.internalError, "The response had no valid :status")))
            } else if endStream {
                self.endExchange(exchange, exchange.finalResult())
            }
            return
        }
        guard let call = self.calls[streamID], !call.done else { return }
        if !call.responseHeadersReceived {
            call.responseHeadersReceived = true
            var httpStatus = ""
            var contentType = ""
            for header in headers {
                if header.name == ":status" { httpStatus = header.value }
                if header.name == "content-type" { contentType = header.value }
            }
            guard httpStatus == "200" else {
                let code = StatusCode.fromHTTPStatus(Int(httpStatus) ?? 0)
                self.fail(call, RPCError(code, "Unexpected HTTP status \(httpStatus)"))
                return
            }
            guard endStream || contentType.hasPrefix("application/grpc") else {
                self.fail(call, RPCError(.unknown, "Unexpected content-type \(contentType)"))
                return
            }
            if !endStream {
                call.responseMetadata = Metadata(headers: headers)
                return
            }
        }
        // Trailers, or a trailers-only response.
        self.completeWithTrailers(call, headers)
    }

    private func completeWithTrailers(_ call: ClientCall, _ headers: [HTTP2Header]) {
        var code: StatusCode?
        var message = ""
        var details: [UInt8]?
        for header in headers {
            switch header.name {
            case "grpc-status": code = Int(header.value).flatMap(StatusCode.init(rawValue:))
            case "grpc-message": message = PercentEncoding.decode(header.value)
            case "grpc-status-details-bin": details = Base64.decode(header.value)
            default: break
            }
        }
        let trailers = Metadata(headers: headers)
        call.trailers = trailers
        var status: RPCError
        if let code {
            status = RPCError(code, message, metadata: trailers, details: details)
        } else {
            status = RPCError(.unknown, "The response had no grpc-status", metadata: trailers)
        }
        if status.code == .ok && call.inbound.hasPartialMessage {
            status = RPCError(.internalError, "The response ended inside a message")
        }
        if status.code == .unavailable && self.goAwayLastStreamID != nil {
            // A server that is shutting down failed the call (its grace period ended).
            call.retry = .interrupted
        }
        self.calls.removeValue(forKey: call.streamID)
        if !call.requestEnded {
            // The server answered before the request ended: what the caller still writes is dropped, and the
            // stream is closed on our side too (RST_STREAM NO_ERROR, RFC 9113 §8.1), or it would hold a slot.
            call.requestEnded = true
            self.session?.resetStream(streamID: call.streamID, errorCode: .noError)
            self.scheduleFlush()
        }
        call.complete(status)
        call.connection = nil
        self.onCallEnded?()
        self.closeIfDone()
    }

    private func fail(_ call: ClientCall, _ error: RPCError) {
        self.cancel(call, error)
    }

    func http2Session(_ session: HTTP2Session, didReceiveData bytes: UnsafeRawBufferPointer, streamID: Int32) {
        if let exchange = self.exchanges[streamID] {
            // Bodies are small (API answers): kept whole, their window given back at once.
            session.consume(streamID: streamID, count: bytes.count)
            if !exchange.receiveData(bytes) {
                session.resetStream(streamID: streamID, errorCode: .cancel)
                self.endExchange(exchange, .failure(RPCError(.resourceExhausted, "The response body is too large")))
            }
            return
        }
        guard let call = self.calls[streamID], !call.done, let context = self.context else {
            session.consume(streamID: streamID, count: bytes.count)
            return
        }
        let release: Int
        do {
            release = try call.inbound.receive(bytes, allocator: context.channel.allocator)
        } catch {
            session.consume(streamID: streamID, count: error.release)
            switch error.failure {
            case .messageTooLarge(let length, let limit):
                self.fail(call, RPCError(.resourceExhausted, "Response message of \(length) bytes exceeds the limit of \(limit)"))
            default:
                self.fail(call, RPCError(.internalError, "Invalid response message frame"))
            }
            return
        }
        session.consume(streamID: streamID, count: release)
        call.deliver()
    }

    func http2Session(_ session: HTTP2Session, didReceiveEndStream streamID: Int32) {
        if let exchange = self.exchanges[streamID] { return self.endExchange(exchange, exchange.finalResult()) }
        // END_STREAM on DATA: the server sent no trailers.
        guard let call = self.calls[streamID], !call.done else { return }
        self.completeWithTrailers(call, [])
    }

    func http2Session(_ session: HTTP2Session, streamClosed streamID: Int32, errorCode: HTTP2ErrorCode) {
        if let exchange = self.exchanges[streamID] {
            let error: RPCError
            switch errorCode {
            case .refusedStream: error = RPCError(.unavailable, "The server refused the stream")
            case .noError: error = RPCError(.internalError, "The stream closed without a response")
            default: error = RPCError(.unavailable, "The server reset the stream (\(errorCode))")
            }
            return self.endExchange(exchange, .failure(error))
        }
        guard let call = self.calls.removeValue(forKey: streamID) else { return }
        if !call.done {
            let status: RPCError
            switch errorCode {
            case .refusedStream:
                status = RPCError(.unavailable, "The server refused the stream")
                call.retry = .unprocessed
            case .cancel: status = RPCError(.cancelled, "The server cancelled the stream")
            case .noError: status = RPCError(.internalError, "The stream closed without a status")
            default: status = RPCError(.internalError, "The server reset the stream (\(errorCode))")
            }
            call.complete(status)
        }
        call.connection = nil
        self.onCallEnded?()
        self.closeIfDone()
    }

    func http2Session(_ session: HTTP2Session, didReceivePing ack: Bool, payload: UInt64) {}

    func http2Session(_ session: HTTP2Session, observed event: HTTP2PeerEvent, streamID: Int32) {
        // nghttp2 applied the SETTINGS before this callback: its remote value is the peer's.
        guard event == .settings else { return }
        let limit = Int(session.remoteMaxConcurrentStreams)
        guard limit != self.peerStreamLimit else { return }
        let first = self.peerStreamLimit == nil
        self.peerStreamLimit = limit
        self.onPeerStreamLimit?(limit, first)
    }

    func http2Session(_ session: HTTP2Session, didReceiveGoAway lastStreamID: Int32, errorCode: HTTP2ErrorCode) {
        self.isDraining = true
        self.goAwayLastStreamID = min(lastStreamID, self.goAwayLastStreamID ?? .max)
        self.onDrain?()
        self.onDrain = nil
        if errorCode != .noError {
            self.logger.debug("Server sent GOAWAY", metadata: ["http2.error": "\(errorCode)"])
        }
        // Streams above lastStreamID were never processed: nghttp2 closes them with REFUSED_STREAM.
    }

    func http2Session(_ session: HTTP2Session, didSendData count: Int, streamID: Int32, pendingBytes: Int) {
        guard pendingBytes <= self.configuration.outboundHighWatermark / 2,
            let call = self.calls[streamID], let writer = call.writerWaiter
        else { return }
        call.writerWaiter = nil
        writer.resume()
    }

    /// Closes the connection once its calls are done (client shutdown).
    func closeWhenIdle() {
        self.isDraining = true
        self.closeRequested = true
        self.closeIfDone()
    }

    private func closeIfDone() {
        if self.closeRequested && self.calls.isEmpty && self.exchanges.isEmpty {
            self.context?.close(promise: nil)
        }
    }
}
