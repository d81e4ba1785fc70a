/// One operation a NATS server sends (https://docs.nats.io/reference/reference-protocols/nats-protocol).
enum NATSServerOperation: Sendable, Hashable {
    /// `INFO {json}`: the server's settings (max_payload, cluster URLs), the JSON bytes as sent.
    case info([UInt8])
    case message(NATSMessage)
    case ping
    case pong
    case ok
    /// `-ERR 'text'`.
    case error(String)
}
