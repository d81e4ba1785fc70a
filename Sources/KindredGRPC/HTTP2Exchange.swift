import KindredHTTP2
import NIOCore

/// One plain request/response exchange on a client connection (one HTTP/2 stream), beside the gRPC calls on the
/// same connections. Its state is touched only on `eventLoop` (hence `@unchecked Sendable`); the calling task
/// waits for the response through `response()`, which hops there.
final class HTTP2Exchange: @unchecked Sendable {
    let eventLoop: any EventLoop
    let request: HTTP2Request
    /// Largest response body kept; a longer one fails the exchange with RESOURCE_EXHAUSTED.
    let maxBodySize: Int

    // Loop-confined state.
    var connection: ClientConnectionHandler?
    var streamID: Int32 = -1
    var deadlineTimer: Scheduled<Void>?
    private var status: Int?
    private var headers: [HTTP2Header] = []
    private var body: [UInt8] = []
    private var result: Result<HTTP2Response, RPCError>?
    private var waiter: CheckedContinuation<HTTP2Response, any Error>?

    var done: Bool { self.result != nil }

    init(eventLoop: any EventLoop, request: HTTP2Request, maxBodySize: Int) {
        self.eventLoop = eventLoop
        self.request = request
        self.maxBodySize = maxBodySize
    }

    // MARK: Called from the calling task

    /// The response, once the stream has ended; throws the exchange's failure (`RPCError`).
    func response() async throws -> HTTP2Response {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTP2Response, any Error>) in
            self.onLoop {
                if let result = self.result {
                    continuation.resume(with: result.mapError { $0 as any Error })
                } else {
                    self.waiter = continuation
                }
            }
        }
    }

    /// Abandons the exchange (task cancellation): RST_STREAM CANCEL and a CANCELLED failure.
    func cancel(_ error: RPCError = RPCError(.cancelled, "The request was cancelled")) {
        self.onLoop { self.connection?.cancel(self, error) ?? self.complete(.failure(error)) }
    }

    private func onLoop(_ body: @escaping @Sendable () -> Void) {
        if self.eventLoop.inEventLoop { body() } else { self.eventLoop.execute(body) }
    }

    // MARK: Loop side

    /// A header block arrived: the response headers (informational 1xx ones are skipped), or trailers. False
    /// when the response headers carry no valid `:status`.
    func receiveHeaders(_ block: [HTTP2Header]) -> Bool {
        if self.status == nil {
            guard let value = block.first(where: { $0.name == ":status" })?.value, let status = Int(value) else {
                return false
            }
            if (100..<200).contains(status) { return true }
            self.status = status
        }
        self.headers += block.filter { !$0.name.hasPrefix(":") }
        return true
    }

    /// Appends response body bytes; false once the body would exceed its limit.
    func receiveData(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard self.body.count + bytes.count <= self.maxBodySize else { return false }
        self.body += bytes
        return true
    }

    /// The outcome once the peer ended the stream.
    func finalResult() -> Result<HTTP2Response, RPCError> {
        guard let status = self.status else {
            return .failure(RPCError(.internalError, "The stream ended without a response"))
        }
        return .success(HTTP2Response(status: status, headers: self.headers, body: self.body))
    }

    /// Records the outcome once and wakes the waiting task.
    func complete(_ result: Result<HTTP2Response, RPCError>) {
        guard self.result == nil else { return }
        self.result = result
        self.deadlineTimer?.cancel()
        self.deadlineTimer = nil
        if let waiter = self.waiter {
            self.waiter = nil
            waiter.resume(with: result.mapError { $0 as any Error })
        }
    }
}
