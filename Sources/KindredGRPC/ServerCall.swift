import KindredHTTP2
import KindredProtobuf
import NIOCore

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
    var requestMetadata: Metadata { Metadata(headers: self.requestHeaders) }
    /// The caller's `x-request-id` when usable, else a new one (computed once, on the loop, when first asked).
    lazy var requestID: String = GRPCRequestID.accept(
        self.requestHeaders.first { $0.name == GRPCRequestID.metadataKey }?.value
    )
    let deadline: NIODeadline?
    let peer: String
    let eventLoop: any EventLoop
    let handler: MethodHandler
    let allocator = ByteBufferAllocator()

    // Loop-confined state.
    var connection: ServerConnectionHandler?
    var deframer: MessageDeframer
    var inbound = MessageQueue()
    /// Received bytes not yet returned to the flow-control window (the frames of queued messages).
    var unconsumedBytes = 0
    var queuedBytes = 0
    var inboundEnded = false
    var readerWaiting: CheckedContinuation<ByteBuffer?, any Error>?
    var writerWaiting: CheckedContinuation<Void, any Error>?
    /// The task waits for its handler's turn to start (see `HandlerAdmission`): resumed with true when
    /// admitted, false when it should ask again.
    var admissionWaiting: CheckedContinuation<Bool, any Error>?
    var responseMetadata = Metadata()
    var trailingMetadata = Metadata()
    var headersSent = false
    /// The status has been sent (or the stream is gone): nothing more goes out.
    var finished = false
    var cancelled = false
    var streamClosed = false
    var handlerStarted = false
    var handlerDone = false
    var startTime: NIODeadline?
    var task: Task<Void, Never>?
    var deadlineTimer: Scheduled<Void>?
    /// When the request body (unary) or the message being received (streaming) must be complete.
    var bodyDeadline: NIODeadline?
    /// Small WINDOW_UPDATEs received for this stream (a few are free, see `ServerConnectionHandler`).
    var smallWindowUpdates = 0

    init(
        streamID: Int32,
        path: String,
        requestHeaders: [HTTP2Header],
        deadline: NIODeadline?,
        peer: String,
        eventLoop: any EventLoop,
        handler: MethodHandler,
        connection: ServerConnectionHandler,
        maxMessageSize: Int
    ) {
        self.streamID = streamID
        self.path = path
        self.requestHeaders = requestHeaders
        self.deadline = deadline
        self.peer = peer
        self.eventLoop = eventLoop
        self.handler = handler
        self.connection = connection
        self.deframer = MessageDeframer(maxMessageSize: maxMessageSize)
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
        do {
            return try bytes.withUnsafeReadableBytes { raw in try Message(serializedBytes: raw) }
        } catch {
            throw RPCError(.invalidArgument, "The request is not a valid \(Message.protoMessageName) message")
        }
    }

    func sendMessage<Message: ProtoMessage>(_ message: Message) throws {
        if Task.isCancelled { throw CancellationError() }
        let framed = try MessageFraming.frame(message, allocator: self.allocator) {
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
            if let connection = self.connection {
                connection.finish(self, error: error)
                connection.handlerFinished(self)
            }
        }
    }

    // MARK: Loop side

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
