/// A message pulled from a durable consumer, with what its ack subject says
/// (`$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>`, or the form with a
/// domain and account hash before the stream).
public struct JetStreamMessage: Sendable, Hashable {
    public var message: NATSMessage
    public var stream: String
    public var consumer: String
    /// 1 on the first delivery, more on redeliveries.
    public var deliveries: UInt64
    public var streamSequence: UInt64
    public var consumerSequence: UInt64
    /// Messages left for the consumer after this one.
    public var pending: UInt64

    public var subject: String { self.message.subject }
    public var payload: [UInt8] { self.message.payload }
    public var headers: NATSHeaders? { self.message.headers }

    /// nil when the message has no well-formed ack subject.
    public init?(_ message: NATSMessage) {
        guard let reply = message.replyTo else { return nil }
        var tokens = reply.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard tokens.count >= 9, tokens[0] == "$JS", tokens[1] == "ACK" else { return nil }
        if tokens.count >= 11 { tokens.removeSubrange(2..<4) }  // domain and account hash
        guard tokens.count >= 9, let deliveries = UInt64(tokens[4]), let streamSequence = UInt64(tokens[5]),
            let consumerSequence = UInt64(tokens[6]), let pending = UInt64(tokens[8])
        else { return nil }
        self.message = message
        self.stream = tokens[2]
        self.consumer = tokens[3]
        self.deliveries = deliveries
        self.streamSequence = streamSequence
        self.consumerSequence = consumerSequence
        self.pending = pending
    }
}
