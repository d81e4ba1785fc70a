import KindredHTTP2
import KindredProtobuf
import KindredTracing
import Logging
import NIOCore
import Tracing

/// One server call (one HTTP/2 stream): the bridge between the connection handler, which owns the stream on
/// the event loop, and the handler's task.
///
/// Every mutable property is touched only on `eventLoop`; methods the handler task calls hop there when
/// they are not already on it. That confinement is why the class is `@unchecked Sendable`.
final class ServerCall: @unchecked Sendable {
    let streamID: Int32
    let path: String
    /// The request's header fields; custom metadata is parsed from them when a handler asks.
    let requestHeaders: [HTTP2Header]
    /// Custom metadata, parsed once when the call opens (handlers may ask several times, from any context).
    let requestMetadata: Metadata
    /// The caller's `x-request-id` when usable, else a new one (computed once, on the loop, when first asked).
    lazy var requestID: String = GRPCRequestID.accept(
        self.requestHeaders.first { $0.name.utf8.count == 12 && $0.name == GRPCRequestID.metadataKey }?.value
    )
    let deadline: NIODeadline?
    /// The protocol the call came in on, and how its response is written.
    let response: WireResponse
    var wire: WireProtocol { self.response.wire }
    let peer: String
    let eventLoop: any EventLoop
    let handler: MethodHandler
    /// The counters of the server the call runs on (`ServerContext.serverMetrics`).
    let metrics: ServerMetrics
    let allocator = ByteBufferAllocator()

    // Loop-confined state.
    var connection: (any ServerCallConnection)?
    /// Request messages not read yet, and the flow-control bytes they hold.
    var inbound: InboundMessages
    var readerWaiting: CheckedContinuation<ByteBuffer?, any Error>?
    var writerWaiting: CheckedContinuation<Void, any Error>?
    /// The task waits for its handler's turn to start (see `HandlerAdmission`): resumed with true when
    /// admitted, false when it should ask again.
    var admissionWaiting: CheckedContinuation<Bool, any Error>?
    var responseMetadata = Metadata()
    var trailingMetadata = Metadata()
    /// Where the request, the response, the handler and the stream are (see `ServerCallState`).
    var state = ServerCallState()
    var startTime: NIODeadline?
    var task: Task<Void, Never>?
    var deadlineTimer: Scheduled<Void>?
    /// When the request body (unary) or the message being received (streaming) must be complete.
    var bodyDeadline: NIODeadline?
    /// Small WINDOW_UPDATEs received for this stream (a few are free, see `ServerConnectionLimits`).
    var smallWindowUpdates = 0
    /// Connect unary's response message, held until the status is known (it goes out with the headers).
    var unaryResponse: ByteBuffer?
    /// The call's server span while `TraceSwitch.isOn` (see `CallTracing`): started with the handler, ended
    /// with the status.
    var span: (any Span)?
    /// What the caller's trace context does to `span` (the server's `GRPCServerConfiguration.callerTrace`).
    let callerTrace: CallerTrace

    init(
        streamID: Int32,
        path: String,
        requestHeaders: [HTTP2Header],
        deadline: NIODeadline?,
        response: WireResponse = WireResponse(wire: .grpc),
        peer: String,
        eventLoop: any EventLoop,
        handler: MethodHandler,
        connection: any ServerCallConnection,
        metrics: ServerMetrics,
        maxMessageSize: Int,
        callerTrace: CallerTrace
    ) {
        self.streamID = streamID
        self.path = path
        self.requestHeaders = requestHeaders
        self.requestMetadata = Metadata(headers: requestHeaders)
        self.deadline = deadline
        self.response = response
        self.peer = peer
        self.eventLoop = eventLoop
        self.handler = handler
        self.connection = connection
        self.metrics = metrics
        self.inbound = InboundMessages(maxMessageSize: maxMessageSize, framed: response.wire.isFramed)
        self.callerTrace = callerTrace
    }

    @inline(__always)
    private func onLoop(_ body: @escaping @Sendable () -> Void) {
        if self.eventLoop.inEventLoop {
            body()
        } else {
            self.eventLoop.execute(body)
        }
    }

    // MARK: Called from the handler task

    func decode<Message: ProtoMessage>(_ bytes: ByteBuffer) throws -> Message {
        if self.wire.usesJSON, let json = self.response.web?.json {
            // JSON becomes binary at the edge; the codec's refusal says what is wrong (INVALID_ARGUMENT).
            let binary: [UInt8]
            do {
                binary = try json.toBinary(Array(bytes.readableBytesView), Message.self)
            } catch let error as RPCError {
                throw error
            } catch {
                throw RPCError(.invalidArgument, "The request is not valid JSON for a \(Message.protoMessageName) message")
            }
            do {
                return try Message(serializedBytes: binary)
            } catch {
                throw RPCError(.invalidArgument, "The request is not a valid \(Message.protoMessageName) message")
            }
        }
        do {
            return try bytes.withUnsafeReadableBytes { raw in try Message(serializedBytes: raw) }
        } catch {
            throw RPCError(.invalidArgument, "The request is not a valid \(Message.protoMessageName) message")
        }
    }

    func sendMessage<Message: ProtoMessage>(_ message: Message) throws {
        if Task.isCancelled { throw CancellationError() }
        let framed = try MessageFraming.encode(message, wire: self.wire, json: self.response.web?.json, allocator: self.allocator) {
            RPCError(.internalError, "The server failed to encode its response")
        }
        self.onLoop {
            self.connection?.sendMessage(framed, on: self)
        }
    }

    func nextMessage() async throws -> ByteBuffer? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ByteBuffer?, any Error>) in
                self.onLoop {
                    self.connection?.read(on: self, continuation: continuation)
                        ?? continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            self.onLoop { self.failWaiters(CancellationError()) }
        }
    }

    /// Returns when the connection lets the handler start: at once unless the connection's queued output is at
    /// its cap (see `HandlerAdmission`). Throws if the call ends (deadline, reset) while it waits.
    func waitForAdmission() async throws {
        // The common case without a suspension: the task runs on its connection's loop (handlers do) and the
        // connection is under its cap with nobody waiting.
        if self.eventLoop.inEventLoop, let connection = self.connection, connection.admitNow(self) { return }
        try await withTaskCancellationHandler {
            while true {
                let admitted = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Bool, any Error>) in
                    self.onLoop {
                        self.connection?.askAdmission(self, continuation: continuation)
                            ?? continuation.resume(throwing: CancellationError())
                    }
                }
                if admitted { return }
            }
        } onCancel: {
            self.onLoop { self.failWaiters(CancellationError()) }
        }
    }

    func waitUntilWritable() async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                self.onLoop {
                    self.connection?.waitUntilWritable(self, continuation: continuation)
                        ?? continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            self.onLoop { self.failWaiters(CancellationError()) }
        }
    }

    func setResponseMetadata(_ metadata: Metadata) {
        self.onLoop { self.responseMetadata = metadata }
    }

    func setTrailingMetadata(_ metadata: Metadata) {
        self.onLoop { self.trailingMetadata = metadata }
    }

    /// The handler returned (nil) or threw.
    func complete(_ error: RPCError?) {
        self.onLoop {
            if let span = self.span {
                self.span = nil
                CallTracing.end(span, code: error?.code ?? .ok)
            }
            if let connection = self.connection {
                connection.finish(self, error: error)
                connection.handlerFinished(self)
            }
        }
    }

    // MARK: Loop side

    /// One line per finished call: what was called, how it ended, how long it took, and the request id that
    /// ties it to the caller's and downstream services' lines. Never message contents or metadata values.
    func logAccess(error: RPCError?, level: Logger.Level, logger: Logger) {
        let code = error?.code ?? .ok
        var metadata: Logger.Metadata = [
            "rpc.method": "\(self.path)",
            "grpc.code": "\(code)",
            "request_id": "\(self.requestID)",
            "net.peer": "\(self.peer)",
        ]
        if let start = self.startTime {
            let micros = (NIODeadline.now() - start).nanoseconds / 1000
            metadata["duration_ms"] = "\(Double(micros) / 1000)"
        }
        // Server-side failures are worth a louder line than the routine ones.
        let serverFault = code == .unknown || code == .internalError || code == .dataLoss
        logger.log(level: serverFault ? max(level, .warning) : level, "rpc", metadata: metadata)
    }

    /// Starts the handler's task (once) with the request's message for single-request methods; its status is sent
    /// through the connection when it returns or throws. Every error is mapped in one place (`RPCError.from`).
    func start(firstMessage: ByteBuffer?, executor: EventLoopTaskExecutor, logger: Logger) {
        guard self.state.startHandler() else { return }
        if TraceSwitch.isOn {
            self.span = CallTracing.startServerSpan(
                path: self.path, requestHeaders: self.requestHeaders, callerTrace: self.callerTrace)
        }
        if let runNow = self.handler.runNow, let firstMessage, self.eventLoop.inEventLoop,
            let connection = self.connection, connection.admitNow(self)
        {
            // An immediate handler: its synchronous part runs here, on the loop, without a task.
            let rest: (@Sendable () async throws -> Void)?
            do {
                rest = try runNow(self, firstMessage)
            } catch {
                self.complete(self.status(for: error, requestID: self.requestID, logger: logger))
                return
            }
            guard let rest else { return self.complete(nil) }
            self.startTask(executor: executor, logger: logger, admitted: true, rest)
            return
        }
        self.startTask(executor: executor, logger: logger, admitted: false) {
            try await self.handler.run(self, firstMessage)
        }
    }

    /// Runs `body` as the call's task on the connection's loop, with the call's deadline and request id in their
    /// task-locals, after the connection admitted the handler (see `HandlerAdmission`).
    private func startTask(
        executor: EventLoopTaskExecutor,
        logger: Logger,
        admitted: Bool,
        _ body: @escaping @Sendable () async throws -> Void
    ) {
        let call = self
        let deadline = self.deadline
        let requestID = self.requestID
        let traceContext = self.span?.context
        self.task = Task(executorPreference: executor) {
            var status: RPCError?
            do {
                if !admitted { try await call.waitForAdmission() }
                try await GRPCRequestID.$current.withValue(requestID) {
                    if let traceContext {
                        // Client calls and statements of the handler become children of the call's span.
                        try await ServiceContext.withValue(traceContext) {
                            try await Self.run(body, deadline: deadline)
                        }
                    } else {
                        try await Self.run(body, deadline: deadline)
                    }
                }
            } catch {
                status = call.status(for: error, requestID: requestID, logger: logger)
            }
            call.complete(status)
        }
    }

    private static func run(_ body: @Sendable () async throws -> Void, deadline: NIODeadline?) async throws {
        if let deadline {
            try await GRPCDeadline.$current.withValue(deadline) {
                try await body()
            }
        } else {
            try await body()
        }
    }

    /// The status a handler's error ends the call with (every error is mapped in one place, `RPCError.from`).
    private func status(for error: any Error, requestID: String, logger: Logger) -> RPCError {
        // Mapped inside the call's request-id scope, so error details built here carry the request id.
        let mapped = GRPCRequestID.$current.withValue(requestID) { RPCError.from(error) }
        // A failure of the server itself gets its detail into the log (the caller sees a fixed message):
        // errors nobody mapped, and mapped ones that say INTERNAL/UNAVAILABLE/DATA_LOSS (a database
        // failure, for instance; their descriptions hold no user data).
        if mapped.code == .unknown || (!(error is RPCError) && [.internalError, .unavailable, .dataLoss].contains(mapped.code)) {
            logger.warning(
                "Handler failed",
                metadata: ["rpc.method": "\(self.path)", "request_id": "\(requestID)", "error": "\(error)"]
            )
        }
        return mapped
    }

    func failWaiters(_ error: any Error) {
        if let reader = self.readerWaiting {
            self.readerWaiting = nil
            reader.resume(throwing: error)
        }
        if let writer = self.writerWaiting {
            self.writerWaiting = nil
            writer.resume(throwing: error)
        }
        if let admission = self.admissionWaiting {
            self.admissionWaiting = nil
            admission.resume(throwing: error)
        }
    }
}

/// The lifecycle of one server call, with no I/O. Four parts move independently (the client may end its request
/// before or after the handler starts, the stream may close before or after the handler returns), so the state
/// is four small enums; every change goes through an event below, which refuses orders that make no sense
/// (a message after the status, a second status, a handler started twice) by returning what to do instead.
struct ServerCallState: Equatable {
    enum Request: Equatable {
        /// The client may send more.
        case open
        /// END_STREAM (or a second header block) arrived.
        case ended
    }

    enum Response: Equatable {
        /// Nothing sent yet.
        case pending
        /// Response headers sent; messages may follow.
        case streaming
        /// The status was sent (or recorded, if the stream was already gone): nothing more goes out.
        case finished
        /// Finished, and the handler was told to stop (deadline, reset, bad input, shutdown).
        case cancelled
    }

    enum Handler: Equatable {
        case notStarted
        case running
        case returned
    }

    enum Stream: Equatable {
        case open
        /// nghttp2 closed the stream (both sides ended, or a reset).
        case closed
    }

    private(set) var request = Request.open
    private(set) var response = Response.pending
    private(set) var handler = Handler.notStarted
    private(set) var stream = Stream.open

    var isFinished: Bool { self.response == .finished || self.response == .cancelled }
    var isCancelled: Bool { self.response == .cancelled }
    var requestEnded: Bool { self.request == .ended }

    /// Returns false when the request had already ended (a duplicate END_STREAM is ignored).
    mutating func requestEnd() -> Bool {
        guard self.request == .open else { return false }
        self.request = .ended
        return true
    }

    /// Returns false if the handler was started already.
    mutating func startHandler() -> Bool {
        guard self.handler == .notStarted else { return false }
        self.handler = .running
        return true
    }

    /// The handler's task returned. True when the call is over on both sides (its stream is closed too), so
    /// the call lets go of the connection.
    mutating func handlerReturned() -> Bool {
        precondition(self.handler == .running, "a handler that was not running returned")
        self.handler = .returned
        return self.stream == .closed
    }

    enum OnSend: Equatable {
        /// Response headers first, then the message.
        case sendHeadersAndMessage
        case sendMessage
        /// The status is out: the message is dropped.
        case drop
    }

    mutating func sendMessage() -> OnSend {
        switch self.response {
        case .pending:
            self.response = .streaming
            return .sendHeadersAndMessage
        case .streaming:
            return .sendMessage
        case .finished, .cancelled:
            return .drop
        }
    }

    enum OnFinish: Equatable {
        /// A status was sent before: this one is dropped.
        case alreadyFinished
        /// Record the status (metrics, access log); the stream is gone, so nothing is sent.
        case record
        /// Record it and send it as trailers after the headers already sent.
        case sendTrailers
        /// Record it and send headers and status in one trailers-only response.
        case sendTrailersOnly
    }

    mutating func finish() -> OnFinish {
        let previous = self.response
        switch previous {
        case .finished, .cancelled:
            return .alreadyFinished
        case .pending, .streaming:
            self.response = .finished
            if self.stream == .closed { return .record }
            return previous == .pending ? .sendTrailersOnly : .sendTrailers
        }
    }

    enum OnCancel: Equatable {
        case alreadyCancelled
        /// Stop the handler; its status was sent already.
        case cancel
        /// Stop the handler; no status was sent, so the call ends CANCELLED (metrics).
        case cancelUnfinished
    }

    mutating func cancel() -> OnCancel {
        switch self.response {
        case .cancelled:
            return .alreadyCancelled
        case .finished:
            self.response = .cancelled
            return .cancel
        case .pending, .streaming:
            self.response = .cancelled
            return .cancelUnfinished
        }
    }

    struct OnStreamClosed: Equatable {
        /// The call had not finished: the client reset it, or the connection is going. Cancel the handler.
        var cancel: Bool
        /// No handler runs: the call lets go of the connection.
        var releaseConnection: Bool
    }

    mutating func streamClosed() -> OnStreamClosed {
        guard self.stream == .open else { return OnStreamClosed(cancel: false, releaseConnection: false) }
        self.stream = .closed
        return OnStreamClosed(cancel: !self.isFinished, releaseConnection: self.handler != .running)
    }
}
