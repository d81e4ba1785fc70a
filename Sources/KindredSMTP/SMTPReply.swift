import NIOCore

/// One server reply (RFC 5321 §4.2): a three-digit code and one or more text lines.
struct SMTPReply: Sendable, Hashable {
    var code: Int
    /// The text of each line, after the code and separator.
    var lines: [String]

    var isPositiveCompletion: Bool { (200..<300).contains(self.code) }
    var isPositiveIntermediate: Bool { (300..<400).contains(self.code) }
    var isTransientFailure: Bool { (400..<500).contains(self.code) }

    /// The RFC 3463 status code at the start of the first line, e.g. "5.1.1".
    var enhancedStatusCode: String? {
        guard let first = self.lines.first else { return nil }
        let token = first.prefix { $0 != " " }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let klass = parts[0].first, "245".contains(klass), parts[0].count == 1,
            parts[1...].allSatisfy({ (1...3).contains($0.count) && $0.allSatisfy(\.isASCIIDigit) })
        else { return nil }
        return String(token)
    }

    /// The text for error reports: lines joined by spaces, control characters dropped, capped.
    var sanitizedText: String {
        let joined = self.lines.joined(separator: " ")
        let cleaned = String(
            joined.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(512).map(Character.init)
        )
        return cleaned
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { self.isASCII && self.isNumber }
}

/// Splits received bytes into lines and lines into replies.
///
/// Lines end with CRLF (a bare LF is accepted). A reply is `ddd-text` lines followed by one
/// `ddd text` (or bare `ddd`) line, all with the same code.
struct SMTPReplyParser {
    /// Longer than RFC 5321's 512 for lenience, short enough that a hostile server cannot make
    /// us buffer much.
    static let maximumLineLength = 4096
    static let maximumLinesPerReply = 256

    private var buffer = ByteBuffer()
    private var pendingCode: Int?
    private var pendingLines: [String] = []

    /// Whether bytes that are not yet a complete reply are buffered.
    var hasBufferedInput: Bool { self.buffer.readableBytes > 0 || self.pendingCode != nil }

    mutating func append(_ bytes: ByteBuffer) {
        var bytes = bytes
        if self.buffer.readableBytes == 0 {
            self.buffer = bytes
        } else {
            self.buffer.writeBuffer(&bytes)
        }
    }

    mutating func append(_ text: String) {
        self.append(ByteBuffer(string: text))
    }

    /// The next complete reply, or nil if more bytes are needed.
    mutating func next() throws(SMTPError) -> SMTPReply? {
        while let line = try self.nextLine() {
            let reply = try self.parse(line: line)
            if let reply { return reply }
        }
        return nil
    }

    private mutating func nextLine() throws(SMTPError) -> [UInt8]? {
        let view = self.buffer.readableBytesView
        guard let newline = view.firstIndex(of: UInt8(ascii: "\n")) else {
            if view.count > Self.maximumLineLength {
                throw SMTPError(code: .protocolError, message: "reply line too long")
            }
            return nil
        }
        var line = Array(view[view.startIndex..<newline])
        self.buffer.moveReaderIndex(forwardBy: newline - view.startIndex + 1)
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        if line.count > Self.maximumLineLength {
            throw SMTPError(code: .protocolError, message: "reply line too long")
        }
        if self.buffer.readableBytes == 0 { self.buffer.clear() }
        return line
    }

    private mutating func parse(line: [UInt8]) throws(SMTPError) -> SMTPReply? {
        guard line.count >= 3, let code = Self.code(line[0], line[1], line[2]) else {
            throw SMTPError(code: .protocolError, message: "malformed reply line")
        }
        let isLast: Bool
        switch line.count > 3 ? line[3] : UInt8(ascii: " ") {
        case UInt8(ascii: " "): isLast = true
        case UInt8(ascii: "-"): isLast = false
        default: throw SMTPError(code: .protocolError, message: "malformed reply line")
        }
        if let pending = self.pendingCode, pending != code {
            throw SMTPError(code: .protocolError, message: "multi-line reply with differing codes")
        }
        let text = line.count > 4 ? String(decoding: line[4...], as: UTF8.self) : ""
        self.pendingLines.append(text)
        if isLast {
            let reply = SMTPReply(code: code, lines: self.pendingLines)
            self.pendingCode = nil
            self.pendingLines = []
            return reply
        }
        guard self.pendingLines.count < Self.maximumLinesPerReply else {
            throw SMTPError(code: .protocolError, message: "reply has too many lines")
        }
        self.pendingCode = code
        return nil
    }

    /// RFC 5321 §4.2: the first digit is 2 to 5, the second 0 to 5, the third any digit.
    private static func code(_ a: UInt8, _ b: UInt8, _ c: UInt8) -> Int? {
        guard (UInt8(ascii: "2")...UInt8(ascii: "5")).contains(a),
            (UInt8(ascii: "0")...UInt8(ascii: "5")).contains(b),
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c)
        else { return nil }
        return Int(a - 48) * 100 + Int(b - 48) * 10 + Int(c - 48)
    }
}

/// What the server said it supports in its EHLO reply (RFC 5321 §4.1.1.1).
struct SMTPCapabilities: Sendable, Hashable {
    var startTLS = false
    /// Upper-cased SASL mechanism names, e.g. ["PLAIN", "LOGIN"].
    var authMechanisms: Set<String> = []
    /// The SIZE limit in bytes; 0 or nil means none was given.
    var maximumSize: Int?
    var eightBitMIME = false
    var enhancedStatusCodes = false
    var pipelining = false
    var smtpUTF8 = false

    init() {}

    /// Parses the lines after the first (which greets with the server's name).
    init(ehloReply reply: SMTPReply) {
        for line in reply.lines.dropFirst() {
            let words = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let keyword = words.first?.uppercased() else { continue }
            let parameters = words.dropFirst()
            switch keyword {
            case "STARTTLS":
                self.startTLS = true
            case "AUTH":
                self.authMechanisms.formUnion(parameters.map { $0.uppercased() })
            case _ where keyword.hasPrefix("AUTH="):
                // Pre-RFC 4954 servers (old Outlook clients needed it) announce "AUTH=LOGIN PLAIN".
                self.authMechanisms.insert(String(keyword.dropFirst(5)))
                self.authMechanisms.formUnion(parameters.map { $0.uppercased() })
            case "SIZE":
                self.maximumSize = parameters.first.flatMap { Int($0) }
            case "8BITMIME":
                self.eightBitMIME = true
            case "ENHANCEDSTATUSCODES":
                self.enhancedStatusCodes = true
            case "PIPELINING":
                self.pipelining = true
            case "SMTPUTF8":
                self.smtpUTF8 = true
            default:
                break
            }
        }
    }
}
