/// A message's headers (`HPUB`/`HMSG`): the `NATS/1.0` line with its optional status (JetStream's 404, 408,
/// 409, a 503 for no responders) and `Name: value` fields. Names compare case-insensitively.
public struct NATSHeaders: Sendable, Hashable {
    /// The status of a status message (`NATS/1.0 404 No Messages`), nil for a plain header block.
    public var status: Int?
    /// The status's description ("No Messages"), empty without one.
    public var statusDescription: String = ""
    /// The fields in order.
    public private(set) var fields: [Field] = []

    public struct Field: Sendable, Hashable {
        public var name: String
        public var value: String
    }

    public init() {}

    public init(_ fields: [(String, String)]) {
        for (name, value) in fields { self.add(name, value) }
    }

    /// The first value of `name`, nil when absent.
    public subscript(name: String) -> String? {
        let lowered = name.lowercased()
        return self.fields.first { $0.name.lowercased() == lowered }?.value
    }

    /// Adds a field. Names and values must not contain CR, LF or (names) a colon: they would change the block.
    public mutating func add(_ name: String, _ value: String) {
        precondition(!name.isEmpty && !name.contains(where: { $0 == "\r" || $0 == "\n" || $0 == ":" || $0 == " " }))
        precondition(!value.contains(where: { $0 == "\r" || $0 == "\n" }))
        self.fields.append(Field(name: name, value: value))
    }

    /// The block as sent: `NATS/1.0\r\n`, the fields, an empty line.
    public var encoded: [UInt8] {
        var text = "NATS/1.0\r\n"
        for field in self.fields { text += "\(field.name): \(field.value)\r\n" }
        text += "\r\n"
        return Array(text.utf8)
    }

    /// Parses a received block (the first `length` bytes of an `HMSG` payload).
    static func parse(_ bytes: some Collection<UInt8>) throws(NATSProtocolError) -> NATSHeaders {
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.hasSuffix("\r\n\r\n") || text.hasSuffix("\r\n") else {
            throw NATSProtocolError(.malformed, "a header block must end with CRLF")
        }
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: true)[...]
        guard let first = lines.popFirst(), first.hasPrefix("NATS/1.0") else {
            throw NATSProtocolError(.malformed, "a header block must start with NATS/1.0")
        }
        var headers = NATSHeaders()
        let status = first.dropFirst("NATS/1.0".count).drop(while: { $0 == " " })
        if !status.isEmpty {
            let digits = status.prefix(while: \.isNumber)
            // Three digits, the first not 0 (100 Idle Heartbeat, 404, 408, 409, 503): "053" would be status 53.
            guard digits.count == 3, let code = Int(digits), (100...999).contains(code) else {
                throw NATSProtocolError(.malformed, "a header status must be three digits from 100 to 999")
            }
            headers.status = code
            headers.statusDescription = String(status.dropFirst(3).drop(while: { $0 == " " }))
        }
        for line in lines {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                throw NATSProtocolError(.malformed, "a header field must be Name: value")
            }
            let name = line[..<colon]
            guard !name.contains(" ") else { throw NATSProtocolError(.malformed, "a header name has a space") }
            let value = line[line.index(after: colon)...].drop(while: { $0 == " " })
            headers.fields.append(Field(name: String(name), value: String(value)))
        }
        return headers
    }
}
