#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// One mail to send: the envelope comes from `from` and `to`, the header and body are rendered
/// by ``SMTPClient`` as RFC 5322 / MIME (UTF-8, encoded-words for non-ASCII header text,
/// quoted-printable or base64 bodies, CRLF lines of at most 998 characters).
///
/// Nothing is checked until sending: then a CR or LF in any header value, name or address, an
/// invalid address or header name, or a header that the client writes itself fails with
/// ``SMTPError/Code/invalidMessage`` before connecting.
public struct SMTPMessage: Sendable, Hashable {
    /// A mailbox: an address and an optional display name (any Unicode).
    ///
    /// Addresses are checked minimally: ASCII, exactly one "@" with text on both sides, no
    /// spaces, control characters or `<>()[],;:\"`, at most 254 characters. Internationalized
    /// domains must be given in their ASCII (punycode) form; non-ASCII local parts (SMTPUTF8) are
    /// not supported.
    public struct Mailbox: Sendable, Hashable {
        public var address: String
        public var displayName: String?

        public init(_ address: String, displayName: String? = nil) {
            self.address = address
            self.displayName = displayName
        }
    }

    /// A header field the client does not write itself, e.g. `List-Unsubscribe` or
    /// `Auto-Submitted`. Values with non-ASCII are sent as encoded-words (as unstructured text).
    public struct Header: Sendable, Hashable {
        public var name: String
        public var value: String

        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    public var from: Mailbox
    /// One or more recipients: the `To` header and the envelope recipients.
    public var to: [Mailbox]
    public var replyTo: Mailbox?
    public var subject: String
    /// The text/plain body.
    public var textBody: String
    /// An optional text/html alternative; with it the body is multipart/alternative.
    public var htmlBody: String?
    /// The `Message-ID` without angle brackets, e.g. `outbox-42@kindred.example`: receivers that
    /// deduplicate on it see a retry of the same outbox row as the same message.
    public var messageID: String
    public var date: Date
    public var headers: [Header]

    public init(
        from: Mailbox,
        to: [Mailbox],
        replyTo: Mailbox? = nil,
        subject: String,
        textBody: String,
        htmlBody: String? = nil,
        messageID: String,
        date: Date = Date(),
        headers: [Header] = []
    ) {
        self.from = from
        self.to = to
        self.replyTo = replyTo
        self.subject = subject
        self.textBody = textBody
        self.htmlBody = htmlBody
        self.messageID = messageID
        self.date = date
        self.headers = headers
    }
}

/// A message ready for the SMTP transaction.
struct EncodedMessage: Sendable, Hashable {
    var envelopeFrom: String
    var recipients: [String]
    /// The message: CRLF lines, 7-bit, not dot-stuffed.
    var content: [UInt8]
    /// For logs: the Message-ID (an outbox identifier, never user data).
    var messageID: String

    /// What goes after DATA's 354: dot-stuffed, terminated.
    var dataPayload: [UInt8] { MIMEEncoding.dotStuffed(self.content) }
}

extension SMTPMessage {
    /// Headers that the client writes itself; `Bcc` and `Cc` too, since they would not match the
    /// envelope.
    private static let reservedHeaders: Set<String> = [
        "from", "to", "cc", "bcc", "reply-to", "subject", "date", "message-id", "mime-version",
        "content-type", "content-transfer-encoding", "return-path", "sender",
    ]

    /// Validates and renders the message.
    /// - Parameter boundary: the multipart boundary; random by default.
    func encoded(boundary: String? = nil) throws(SMTPError) -> EncodedMessage {
        try Self.check(address: self.from.address, field: "from")
        guard !self.to.isEmpty else { throw Self.invalid("the message has no recipient") }
        for mailbox in self.to { try Self.check(address: mailbox.address, field: "to") }
        if let replyTo = self.replyTo { try Self.check(address: replyTo.address, field: "reply-to") }
        for name in [self.from.displayName, self.replyTo?.displayName] + self.to.map(\.displayName) {
            try Self.check(headerValue: name ?? "", field: "display name")
        }
        try Self.check(headerValue: self.subject, field: "subject")
        try Self.check(messageID: self.messageID)
        for header in self.headers {
            try Self.check(headerName: header.name)
            try Self.check(headerValue: header.value, field: "header")
        }

        var head = ""
        head += "Date: \(Self.rfc5322Date(self.date))\r\n"
        head += Self.addressHeader("From", [self.from])
        head += Self.addressHeader("To", self.to)
        if let replyTo = self.replyTo { head += Self.addressHeader("Reply-To", [replyTo]) }
        head += "Message-ID: <\(self.messageID)>\r\n"
        head += MIMEEncoding.unstructuredHeader(name: "Subject", value: self.subject)
        for header in self.headers {
            head += MIMEEncoding.unstructuredHeader(name: header.name, value: header.value)
        }
        head += "MIME-Version: 1.0\r\n"

        var content = Array(head.utf8)
        let text = MIMEEncoding.normalizedLines(self.textBody)
        if let html = self.htmlBody.map(MIMEEncoding.normalizedLines) {
            // "=_" cannot occur in quoted-printable or base64 output, so the parts (never 7bit
            // here) cannot contain the boundary.
            let boundary = boundary ?? Self.randomBoundary()
            content += Array("Content-Type: multipart/alternative;\r\n boundary=\"\(boundary)\"\r\n\r\n".utf8)
            for (subtype, body) in [("plain", text), ("html", html)] {
                content += Array("--\(boundary)\r\n".utf8)
                content += Self.part(subtype: subtype, body: body, allowSevenBit: false)
                content += MIMEEncoding.crlf
            }
            content += Array("--\(boundary)--\r\n".utf8)
        } else {
            content += Self.part(subtype: "plain", body: text, allowSevenBit: true)
        }
        return EncodedMessage(
            envelopeFrom: self.from.address,
            recipients: self.to.map(\.address),
            content: content,
            messageID: self.messageID
        )
    }

    /// Content headers, blank line and encoded body of one text part, ending in CRLF.
    private static func part(subtype: String, body: [UInt8], allowSevenBit: Bool) -> [UInt8] {
        let encoding = MIMEEncoding.transferEncoding(for: body, allowSevenBit: allowSevenBit)
        var output = Array(
            "Content-Type: text/\(subtype); charset=utf-8\r\nContent-Transfer-Encoding: \(encoding.rawValue)\r\n\r\n"
                .utf8
        )
        output += MIMEEncoding.encode(body, as: encoding)
        if output.last != 0x0A { output += MIMEEncoding.crlf }
        return output
    }

    private static func addressHeader(_ name: String, _ mailboxes: [Mailbox]) -> String {
        var tokens: [String] = []
        for (index, mailbox) in mailboxes.enumerated() {
            var mailboxTokens: [String]
            if let displayName = mailbox.displayName, !displayName.isEmpty {
                let firstLength = tokens.isEmpty ? MIMEEncoding.preferredLineLength - name.utf8.count - 2 : 75
                mailboxTokens = MIMEEncoding.phraseTokens(displayName, firstLength: firstLength)
                mailboxTokens.append("<\(mailbox.address)>")
            } else {
                mailboxTokens = [mailbox.address]
            }
            if index < mailboxes.count - 1 { mailboxTokens[mailboxTokens.count - 1] += "," }
            tokens += mailboxTokens
        }
        return MIMEEncoding.foldedHeader(name: name, tokens: tokens)
    }

    private static func randomBoundary() -> String {
        var generator = SystemRandomNumberGenerator()
        let hex = (0..<2).map { _ in String(generator.next() as UInt64, radix: 16) }.joined(separator: ".")
        return "=_kindred_" + hex
    }

    // MARK: Validation

    private static func invalid(_ message: String) -> SMTPError {
        SMTPError(code: .invalidMessage, message: message)
    }

    static func check(address: String, field: String) throws(SMTPError) {
        let bytes = Array(address.utf8)
        guard !bytes.isEmpty, bytes.count <= 254 else { throw Self.invalid("\(field): address length is not 1 to 254") }
        if bytes.contains(0x0D) || bytes.contains(0x0A) {
            throw Self.invalid("\(field): address contains CR or LF")
        }
        let forbidden = Array("<>()[],;:\\\"".utf8)
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F && !forbidden.contains($0) }) else {
            throw Self.invalid("\(field): address contains a space, control, non-ASCII or special character")
        }
        let parts = bytes.split(separator: UInt8(ascii: "@"), omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw Self.invalid("\(field): address needs exactly one @ with text on both sides")
        }
    }

    /// Header values may hold any Unicode but no line breaks (header injection) and no controls
    /// other than tab.
    static func check(headerValue value: String, field: String) throws(SMTPError) {
        for scalar in value.unicodeScalars {
            if scalar == "\r" || scalar == "\n" || scalar == "\u{85}" || scalar == "\u{2028}" || scalar == "\u{2029}" {
                throw Self.invalid("\(field): value contains a line break")
            }
            if (scalar.value < 0x20 && scalar != "\t") || scalar.value == 0x7F {
                throw Self.invalid("\(field): value contains a control character")
            }
        }
    }

    static func check(headerName name: String) throws(SMTPError) {
        // RFC 5322 §3.6.8: printable ASCII except ":".
        guard !name.isEmpty, name.utf8.count <= 76,
            name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") })
        else { throw Self.invalid("header name is empty, too long or not printable ASCII without ':'") }
        guard !Self.reservedHeaders.contains(name.lowercased()) else {
            throw Self.invalid("header is written by the client itself and cannot be given")
        }
    }

    static func check(messageID: String) throws(SMTPError) {
        let bytes = Array(messageID.utf8)
        let forbidden = Array("<>()[],;:\\\"".utf8)
        guard (3...250).contains(bytes.count),
            bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F && !forbidden.contains($0) }),
            bytes.split(separator: UInt8(ascii: "@"), omittingEmptySubsequences: false).count == 2,
            bytes.first != UInt8(ascii: "@"), bytes.last != UInt8(ascii: "@")
        else { throw Self.invalid("message-id must be printable ASCII left@right without brackets or spaces") }
    }

    // MARK: Date

    private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// RFC 5322 §3.3 date-time in UTC, e.g. "Thu, 01 Jan 1970 00:00:00 +0000".
    static func rfc5322Date(_ date: Date) -> String {
        let seconds = Int(date.timeIntervalSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
        let secondOfDay = seconds - days * 86400
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        let weekday = Self.weekdays[((days % 7) + 7) % 7]
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(weekday), \(two(day)) \(Self.months[month - 1]) \(year) "
            + "\(two(secondOfDay / 3600)):\(two(secondOfDay % 3600 / 60)):\(two(secondOfDay % 60)) +0000"
    }
}
