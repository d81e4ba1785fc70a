/// What went wrong talking to a NATS server. The parser throws ``NATSProtocolError/Kind/malformed`` and
/// ``NATSProtocolError/Kind/tooLarge`` for a peer's bytes it will not accept (the connection is then closed);
/// the client throws the others.
public struct NATSProtocolError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// The server sent bytes that are not the NATS protocol.
        case malformed
        /// A control line or message larger than the limits.
        case tooLarge
        /// No server could be reached, or the connection is down (reconnecting).
        case notConnected
        /// The connection broke while the call waited.
        case connectionLost
        /// No answer within the call's timeout.
        case timeout
        /// The server answered `-ERR`, or a status (503: nobody subscribes to the subject).
        case server
        /// The client was closed.
        case closed
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { "NATS \(self.kind): \(self.message)" }
}
