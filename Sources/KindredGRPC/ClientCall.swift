import KindredProtobuf
import NIOCore

/// The client side of one call (one HTTP/2 stream). Mutable state is touched only on `eventLoop`
/// (hence `@unchecked Sendable`); the calling task reaches it through the async methods, which hop there.
final class ClientCall: @unchecked Sendable {
    let eventLoop: any EventLoop
    let maxMessageSize: Int

    // Loop-confined state.
    var connection: ClientConnectionHandler?
    var streamID: Int32 = -1
    /// Response messages not read yet, and the flow-control bytes they hold.
    var inbound: InboundMessages
    var responseHeadersReceived = false
    /// END_STREAM was sent (or the stream was reset after the server answered early).
    var requestEnded = false
    var responseMetadata = Metadata()
    var status: RPCError?
    /// Whether the call, if it failed, may be made again on another replica; set before `complete`.
    var retry = Retry.no
    var trailers = Metadata()
    var done: Bool { self.status != nil }
    var messageWaiter: CheckedContinuation<ByteBuffer?, any Error>?
    var statusWaiters: [CheckedContinuation<RPCError, Never>] = []
    var writerWaiter: CheckedContinuation<Void, any Error>?
    var deadlineTimer: Scheduled<Void>?
    /// A unary call's caller (`GRPCClient.unary`), resumed once with the outcome when the call completes. It is
    /// set in the same hop to the loop that opens the stream and sends the request, so a unary call crosses to
    /// the loop once and back once. Resumed with nil when the connection took no new stream (nothing was sent).
    var unaryWaiter: UnsafeContinuation<UnaryOutcome?, Never>?
    /// A unary call's response message, taken as it arrives (its bytes go back to the window at once).
    var unaryMessage: ByteBuffer?

    /// How a unary call ended: its first response message, the response headers' metadata and the status.
    struct UnaryOutcome: Sendable {
        var message: ByteBuffer?
        var metadata: Metadata
        var status: RPCError
        var retry = Retry.no
    }

    /// Whether a failed call may be made again on another replica (`ReplicaBalancer`).
    enum Retry: Sendable {
        /// No: it succeeded, or the server may have acted on it.
        case no
        /// The server never processed it (its stream was refused, or was above a GOAWAY's last stream id): any
        /// call may go again.
        case unprocessed
        /// Its connection broke mid-call, or a shutting-down server failed it: the server may have acted, so only
        /// an idempotent call goes again.
        case interrupted
    }

    init(eventLoop: any EventLoop, maxMessageSize: Int) {
        self.eventLoop = eventLoop
        self.maxMessageSize = maxMessageSize
        self.inbound = InboundMessages(maxMessageSize: maxMessageSize)
    }

    private func onLoop(_ body: @escaping @Sendable () -> Void) {
        if self.eventLoop.inEventLoop {
            body()
        } else {
            self.eventLoop.execute(body)
        }
    }

    // MARK: Called from the calling task

    func send<Message: ProtoMessage>(_ message: Message) throws {
        let framed = try MessageFraming.frame(message, allocator: ByteBufferAllocator()) {
            RPCError(.internalError, "Failed to encode the request")
        }
        self.onLoop { self.connection?.send(framed, on: self) }
    }

    /// Half-closes the request side.
    func end() {
        self.onLoop { self.connection?.end(self) }
    }

    /// Waits while too many request bytes are queued.
    func waitUntilWritable() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            self.onLoop {
                guard let connection = self.connection, !self.done else {
                    // The server answered already: with OK, what is left to write is not wanted and the caller
                    // goes on to read the response; any other status is the call's error.
                    if let status = self.status, status.code == .ok { return continuation.resume() }
                    continuation.resume(throwing: self.status ?? RPCError(.unavailable, "Connection lost"))
                    return
                }
                connection.waitUntilWritable(self, continuation: continuation)
            }
        }
    }

    /// The next response message, nil at the end of the stream (check `finalStatus()` then).
    func nextMessage() async throws -> ByteBuffer? {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ByteBuffer?, any Error>) in
            self.onLoop {
                precondition(self.messageWaiter == nil, "response stream iterated concurrently")
                self.messageWaiter = continuation
                self.deliver()
            }
        }
    }

    func finalStatus() async -> RPCError {
        await withCheckedContinuation { (continuation: CheckedContinuation<RPCError, Never>) in
            self.onLoop {
                if let status = self.status {
                    continuation.resume(returning: status)
                } else {
                    self.statusWaiters.append(continuation)
                }
            }
        }
    }

    func decode<Message: ProtoMessage>(_ bytes: ByteBuffer) throws -> Message {
        do {
            return try bytes.withUnsafeReadableBytes { try Message(serializedBytes: $0) }
        } catch {
            throw RPCError(.internalError, "The response is not a valid \(Message.protoMessageName) message")
        }
    }

    /// Cancels the call (task cancellation or the body returned early): RST_STREAM and status CANCELLED.
    func cancel(_ error: RPCError = RPCError(.cancelled, "The call was cancelled")) {
        self.onLoop { self.connection?.cancel(self, error) ?? self.complete(error) }
    }

    // MARK: Loop side

    /// Hands queued messages (or the end of the stream) to a waiting reader.
    func deliver() {
        if self.unaryWaiter != nil {
            while !self.inbound.isEmpty {
                let (message, release) = self.inbound.removeFirst()
                self.connection?.release(self, count: release)
                if self.unaryMessage == nil { self.unaryMessage = message }
            }
            return
        }
        guard let waiter = self.messageWaiter else { return }
        if !self.inbound.isEmpty {
            self.messageWaiter = nil
            let (message, release) = self.inbound.removeFirst()
            self.connection?.release(self, count: release)
            waiter.resume(returning: message)
        } else if let status = self.status {
            self.messageWaiter = nil
            if status.code == .ok {
                waiter.resume(returning: nil)
            } else {
                waiter.resume(throwing: status)
            }
        }
    }

    /// Records the final status once and wakes everyone waiting.
    func complete(_ status: RPCError) {
        guard self.status == nil else { return }
        self.status = status
        self.deadlineTimer?.cancel()
        self.deadlineTimer = nil
        if status.code != .ok {
            // Unread messages are dropped: their bytes go back to the (connection's) window.
            let held = self.inbound.removeAll()
            if held > 0 { self.connection?.release(self, count: held) }
        }
        self.deliver()
        if let waiter = self.unaryWaiter {
            self.unaryWaiter = nil
            let message = status.code == .ok ? self.unaryMessage : nil
            self.unaryMessage = nil
            waiter.resume(
                returning: UnaryOutcome(message: message, metadata: self.responseMetadata, status: status, retry: self.retry))
        }
        let waiters = self.statusWaiters
        self.statusWaiters = []
        for waiter in waiters { waiter.resume(returning: status) }
        if let writer = self.writerWaiter {
            self.writerWaiter = nil
            if status.code == .ok { writer.resume() } else { writer.resume(throwing: status) }
        }
    }
}
