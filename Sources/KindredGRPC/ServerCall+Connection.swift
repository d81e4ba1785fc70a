import KindredHTTP2
import Logging
import NIOCore

/// What both connections (`ServerConnectionHandler` over HTTP/2, `HTTP1CallHandler` over HTTP/1.1) do to a call
/// the same way: count it and arm its deadline as it opens, record its status as it finishes, stop it as it is
/// cancelled. The connections keep only what their wire differs in. Called on the call's loop.
extension ServerCall {
    /// Counts the call as started at `now` and, when it has a deadline, arms the timer that ends it
    /// DEADLINE_EXCEEDED through its connection.
    func opened(now: NIODeadline) {
        self.metrics.callStarted()
        self.startTime = now
        guard let deadline = self.deadline else { return }
        self.deadlineTimer = self.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            self.deadlineTimer = nil
            self.connection?.deadlineExceeded(self)
        }
    }

    /// Marks the status sent, once: stops the deadline timer, counts the call and writes its access line (at
    /// `accessLogLevel`, nil for none). Returns what the connection has to send.
    func finishing(_ error: RPCError?, accessLogLevel: Logger.Level?, logger: Logger) -> ServerCallState.OnFinish {
        let send = self.state.finish()
        if send == .alreadyFinished { return send }
        self.stopDeadlineTimer()
        self.metrics.callFinished(path: self.path, code: error?.code ?? .ok, start: self.startTime)
        if let accessLogLevel { self.logAccess(error: error, level: accessLogLevel, logger: logger) }
        return send
    }

    /// The status after the response headers went out (`ServerCallState.OnFinish.sendTrailers`).
    func responseEnd(_ error: RPCError?) -> (data: ByteBuffer?, trailers: [HTTP2Header]?) {
        self.response.end(error, trailers: self.trailingMetadata, allocator: self.allocator)
    }

    /// The whole response when no header went out yet (`.sendTrailersOnly`), with Connect unary's held message.
    func wholeResponse(_ error: RPCError?) -> (headers: [HTTP2Header], body: ByteBuffer?) {
        let whole = self.response.complete(
            error,
            metadata: self.responseMetadata,
            trailers: self.trailingMetadata,
            message: self.unaryResponse,
            allocator: self.allocator
        )
        self.unaryResponse = nil
        return whole
    }

    /// Stops the handler and drops what it has not read; a call without status ends CANCELLED. Returns the
    /// flow-control bytes the dropped messages held, or nil when the call was cancelled before.
    func cancelling() -> Int? {
        switch self.state.cancel() {
        case .alreadyCancelled:
            return nil
        case .cancelUnfinished:
            self.stopDeadlineTimer()
            self.metrics.callFinished(path: self.path, code: .cancelled, start: self.startTime)
        case .cancel:
            break
        }
        self.task?.cancel()
        self.failWaiters(CancellationError())
        return self.inbound.removeAll()
    }

    private func stopDeadlineTimer() {
        self.deadlineTimer?.cancel()
        self.deadlineTimer = nil
    }
}
