import NIOCore

/// Splits the bytes a NATS server sends into ``NATSServerOperation``s. It reads a network peer's bytes, so it
/// trusts nothing: a control line is at most ``maxControlLine`` bytes, a message at most ``maxPayload`` (header
/// block included), sizes are plain decimal numbers, a header block fits in its message, and a message ends with
/// CRLF; anything else throws ``NATSProtocolError`` (`malformed` or `tooLarge`) and the connection is closed.
struct NATSParser {
    static let defaultMaxControlLine = 4096
    /// The client's ceiling whatever the server announces (its INFO's max_payload is usually 1 MiB).
    static let defaultMaxPayload = 8 << 20

    var maxControlLine: Int
    var maxPayload: Int
    private var buffer = ByteBuffer()

    init(maxControlLine: Int = Self.defaultMaxControlLine, maxPayload: Int = Self.defaultMaxPayload) {
        self.maxControlLine = maxControlLine
        self.maxPayload = maxPayload
    }

    mutating func append(_ bytes: ByteBuffer) {
        var bytes = bytes
        self.buffer.writeBuffer(&bytes)
    }

    mutating func append(_ bytes: [UInt8]) {
        self.buffer.writeBytes(bytes)
    }

    /// The next complete operation, nil when more bytes are needed.
    mutating func next() throws(NATSProtocolError) -> NATSServerOperation? {
        let readable = self.buffer.readableBytesView
        guard let lineEnd = Self.crlf(in: readable) else {
            // The line so far, and the CR of a line of exactly the limit whose LF has not arrived yet.
            if readable.count > self.maxControlLine + 1 {
                throw NATSProtocolError(.tooLarge, "a control line is longer than \(self.maxControlLine) bytes")
            }
            return nil
        }
        let lineLength = lineEnd - readable.startIndex
        guard lineLength <= self.maxControlLine else {
            throw NATSProtocolError(.tooLarge, "a control line is longer than \(self.maxControlLine) bytes")
        }
        let line = Array(readable[readable.startIndex..<lineEnd])
        let verbEnd = line.firstIndex { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") } ?? line.count
        // Verbs are ASCII, in either case; `uppercased()` would also map "pıng" (dotless i) to PING.
        let verb = String(decoding: line[..<verbEnd].map { (97...122).contains($0) ? $0 - 32 : $0 }, as: UTF8.self)
        let rest = line[verbEnd...]
        let consumedLine = lineLength + 2
        switch verb {
        case "PING":
            self.buffer.moveReaderIndex(forwardBy: consumedLine)
            return .ping
        case "PONG":
            self.buffer.moveReaderIndex(forwardBy: consumedLine)
            return .pong
        case "+OK":
            self.buffer.moveReaderIndex(forwardBy: consumedLine)
            return .ok
        case "-ERR":
            self.buffer.moveReaderIndex(forwardBy: consumedLine)
            var text = String(decoding: rest, as: UTF8.self).trimmingSpaces()
            if text.hasPrefix("'") && text.hasSuffix("'") && text.count >= 2 { text = String(text.dropFirst().dropLast()) }
            return .error(text)
        case "INFO":
            let json = Array(rest.drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") })
            guard json.first == UInt8(ascii: "{") else { throw NATSProtocolError(.malformed, "INFO without JSON") }
            self.buffer.moveReaderIndex(forwardBy: consumedLine)
            return .info(json)
        case "MSG", "HMSG":
            let fields = Self.fields(rest)
            let hasHeaders = verb == "HMSG"
            // MSG <subject> <sid> [reply-to] <#bytes>; HMSG <subject> <sid> [reply-to] <#header bytes> <#total bytes>
            let sizes = hasHeaders ? 2 : 1
            guard fields.count == 2 + sizes || fields.count == 3 + sizes else {
                throw NATSProtocolError(.malformed, "\(verb) has \(fields.count) fields")
            }
            let subject = fields[0]
            guard let sid = Self.number(fields[1]) else { throw NATSProtocolError(.malformed, "\(verb) sid is not a number") }
            let replyTo = fields.count == 3 + sizes ? fields[2] : nil
            guard let total = Self.number(fields[fields.count - 1]) else {
                throw NATSProtocolError(.malformed, "\(verb) size is not a number")
            }
            let headerLength = hasHeaders ? Self.number(fields[fields.count - 2]) : 0
            guard let headerLength, headerLength <= total else {
                throw NATSProtocolError(.malformed, "HMSG header size is not a number within the total")
            }
            guard total <= UInt64(self.maxPayload) else {
                throw NATSProtocolError(.tooLarge, "a message of \(total) bytes exceeds \(self.maxPayload)")
            }
            if hasHeaders && headerLength < 10 {  // "NATS/1.0\r\n" at least
                throw NATSProtocolError(.malformed, "HMSG header block shorter than its version line")
            }
            let needed = consumedLine + Int(total) + 2
            guard readable.count >= needed else { return nil }
            let bodyStart = readable.startIndex + consumedLine
            let bodyEnd = bodyStart + Int(total)
            guard readable[bodyEnd] == UInt8(ascii: "\r"), readable[bodyEnd + 1] == UInt8(ascii: "\n") else {
                throw NATSProtocolError(.malformed, "\(verb) payload is not followed by CRLF")
            }
            let headers: NATSHeaders? =
                hasHeaders ? try NATSHeaders.parse(readable[bodyStart..<(bodyStart + Int(headerLength))]) : nil
            let payload = Array(readable[(bodyStart + Int(headerLength))..<bodyEnd])
            self.buffer.moveReaderIndex(forwardBy: needed)
            return .message(
                NATSMessage(subject: subject, replyTo: replyTo, headers: headers, payload: payload, sid: sid))
        default:
            throw NATSProtocolError(.malformed, "unknown operation")
        }
    }

    /// Releases the bytes already parsed (call after a read's operations are taken).
    mutating func compact() {
        self.buffer.discardReadBytes()
    }

    private static func crlf(in bytes: ByteBufferView) -> Int? {
        var index = bytes.startIndex
        while let cr = bytes[index...].firstIndex(of: UInt8(ascii: "\r")) {
            let next = bytes.index(after: cr)
            guard next < bytes.endIndex else { return nil }
            if bytes[next] == UInt8(ascii: "\n") { return cr }
            index = next
        }
        return nil
    }

    /// Space- or tab-separated fields, each a valid subject-like token (printable ASCII, no spaces).
    private static func fields(_ bytes: ArraySlice<UInt8>) -> [String] {
        bytes.split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") })
            .map { String(decoding: $0, as: UTF8.self) }
    }

    /// A plain decimal number of at most 18 digits (no sign, no spaces).
    private static func number(_ text: String) -> UInt64? {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return UInt64(text)
    }
}

extension String {
    fileprivate func trimmingSpaces() -> String {
        var text = Substring(self)
        while text.first == " " || text.first == "\t" { text.removeFirst() }
        while text.last == " " || text.last == "\t" { text.removeLast() }
        return String(text)
    }
}
