import NIOCore

/// Which deadline an HTTP/1.1 connection is under, from what happened on it: a value type with the time passed
/// in, tested without I/O.
///
/// - A new connection waits for its first request's header (`headerTimeout` from the accept: a silent connection
///   is a slow header).
/// - The header's first byte to its end: `headerTimeout`. Then the body to the request's end: `bodyTimeout`.
/// - While the request is being answered: no deadline (the answer is bounded by the server's own deadlines).
/// - After the response is handed to the socket: `idleTimeout` until the next request's first byte.
struct HTTP1ConnectionTimer: Sendable, Hashable {
    enum Phase: Sendable, Hashable {
        /// Between requests (kept alive): waiting for a first byte.
        case idle
        /// Reading a request header.
        case header
        /// Reading a request body.
        case body
        /// The request is complete; its answer is being made.
        case answering
    }

    /// What closed a connection, as the metric's `timeout` label.
    enum Timeout: String, Sendable, Hashable, CaseIterable {
        case header, body, idle
    }

    let limits: HTTP1Limits
    private(set) var phase: Phase
    /// When the current phase times out; nil while answering.
    private(set) var deadline: NIODeadline?

    init(limits: HTTP1Limits, openedAt now: NIODeadline) {
        self.limits = limits
        self.phase = .header
        self.deadline = now + TimeAmount(limits.headerTimeout)
    }

    /// Bytes arrived from the client: a kept-alive connection starts reading a header.
    mutating func bytesReceived(now: NIODeadline) {
        guard self.phase == .idle else { return }
        self.phase = .header
        self.deadline = now + TimeAmount(self.limits.headerTimeout)
    }

    /// A request's header was decoded (possibly one that was pipelined and held while the previous was answered).
    mutating func headReceived(now: NIODeadline) {
        self.phase = .body
        self.deadline = now + TimeAmount(self.limits.bodyTimeout)
    }

    /// The request is complete.
    mutating func requestEnded() {
        guard self.phase == .body else { return }
        self.phase = .answering
        self.deadline = nil
    }

    /// The response's end was written.
    mutating func responseEnded(now: NIODeadline) {
        guard self.phase == .answering else { return }
        self.phase = .idle
        self.deadline = now + TimeAmount(self.limits.idleTimeout)
    }

    /// The timeout that has passed at `now`, if one has.
    func expired(now: NIODeadline) -> Timeout? {
        guard let deadline = self.deadline, now >= deadline else { return nil }
        switch self.phase {
        case .idle: return .idle
        case .header: return .header
        case .body: return .body
        case .answering: return nil
        }
    }
}
