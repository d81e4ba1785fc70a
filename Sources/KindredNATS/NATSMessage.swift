/// A message received on a subscription (`MSG` or `HMSG`).
public struct NATSMessage: Sendable, Hashable {
    public var subject: String
    /// Where answers go (a request's inbox, a JetStream ack subject); nil when none.
    public var replyTo: String?
    /// nil for a `MSG` (no header block).
    public var headers: NATSHeaders?
    public var payload: [UInt8]
    /// The subscription it came on.
    var sid: UInt64

    public init(subject: String, replyTo: String?, headers: NATSHeaders?, payload: [UInt8], sid: UInt64 = 0) {
        self.subject = subject
        self.replyTo = replyTo
        self.headers = headers
        self.payload = payload
        self.sid = sid
    }

    /// The header status (JetStream's 404 No Messages, 408 Request Timeout, 409, 503 no responders).
    public var status: Int? { self.headers?.status }
}
