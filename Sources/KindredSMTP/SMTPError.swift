/// A failure to send a message: what went wrong, whether retrying may help, and the server's reply.
///
/// `description` shows the code, a fixed message, and the reply code and enhanced status code if a
/// server reply caused the failure. It never contains the password, the message content or the
/// server's reply text (which can echo addresses); that text is in ``replyText`` for callers that
/// want it.
public struct SMTPError: Error, CustomStringConvertible, Sendable {
    /// What went wrong; a struct around a private enum so that codes can be added.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: Sendable, Hashable {
            case connectionFailed
            case tlsFailed
            case authenticationFailed
            case rejectedRecipient
            case rejectedSender
            case messageRejected
            case timeout
            case protocolError
            case invalidMessage
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The connection could not be made, was refused by the greeting (e.g. 554, 421), or was
        /// lost before the message was accepted.
        public static let connectionFailed = Code(.connectionFailed)
        /// TLS could not be set up: the trust roots file is unusable, the server offers no
        /// STARTTLS although it is required, the handshake failed (certificate not trusted, name
        /// mismatch), or the server refused STARTTLS.
        public static let tlsFailed = Code(.tlsFailed)
        /// The server rejected the credentials, offers no mechanism we support, or credentials
        /// would have been sent without TLS.
        public static let authenticationFailed = Code(.authenticationFailed)
        /// The server refused a `RCPT TO` (e.g. 550 unknown user, 450 greylisting).
        public static let rejectedRecipient = Code(.rejectedRecipient)
        /// The server refused the `MAIL FROM` (the sender address, or the announced size).
        public static let rejectedSender = Code(.rejectedSender)
        /// The server refused `DATA` or the message content, or the message exceeds the server's
        /// advertised `SIZE`.
        public static let messageRejected = Code(.messageRejected)
        /// No reply within the per-command timeout (or no TLS handshake within it).
        public static let timeout = Code(.timeout)
        /// The server's replies violate RFC 5321 (malformed line, unexpected reply, data after
        /// the STARTTLS reply).
        public static let protocolError = Code(.protocolError)
        /// The message cannot be sent as given: header injection, invalid address, missing field.
        /// Raised before connecting.
        public static let invalidMessage = Code(.invalidMessage)

        public var description: String {
            switch self.base {
            case .connectionFailed: "connectionFailed"
            case .tlsFailed: "tlsFailed"
            case .authenticationFailed: "authenticationFailed"
            case .rejectedRecipient: "rejectedRecipient"
            case .rejectedSender: "rejectedSender"
            case .messageRejected: "messageRejected"
            case .timeout: "timeout"
            case .protocolError: "protocolError"
            case .invalidMessage: "invalidMessage"
            }
        }

        /// Whether failures of this kind without a reply code are worth retrying.
        fileprivate var isTransientWithoutReply: Bool {
            switch self.base {
            case .connectionFailed, .tlsFailed, .timeout, .protocolError: true
            case .authenticationFailed, .rejectedRecipient, .rejectedSender, .messageRejected, .invalidMessage: false
            }
        }
    }

    public var code: Code
    /// A fixed message saying what failed.
    public var message: String
    /// The SMTP reply code that caused the failure, if any (e.g. 550).
    public var replyCode: Int?
    /// The RFC 3463 enhanced status code of that reply, if it had one (e.g. "5.1.1").
    public var enhancedStatusCode: String?
    /// The server's reply text (control characters removed, at most 512 characters). It can
    /// contain addresses, so it is not part of ``description``.
    public var replyText: String?
    /// The local cause of a network or TLS failure, e.g. `connection reset by peer` or an
    /// ``OpenSSLError`` description (certificate verification result, never key material).
    public var detail: String?
    /// Set when the failure is local and permanent although its code is usually transient
    /// (an unreadable trust roots file).
    private var permanentOverride: Bool

    /// Whether retrying the same message later may succeed: true for 4xx replies and for network
    /// failures (connection, TLS handshake, timeout, protocol error); false for 5xx replies,
    /// invalid messages, credentials that were rejected and local configuration errors.
    public var isTransient: Bool {
        if self.permanentOverride { return false }
        if let replyCode = self.replyCode {
            return (400..<500).contains(replyCode)
        }
        return self.code.isTransientWithoutReply
    }

    public init(
        code: Code,
        message: String,
        replyCode: Int? = nil,
        enhancedStatusCode: String? = nil,
        replyText: String? = nil,
        detail: String? = nil
    ) {
        self.code = code
        self.message = message
        self.replyCode = replyCode
        self.enhancedStatusCode = enhancedStatusCode
        self.replyText = replyText
        self.detail = detail
        self.permanentOverride = false
    }

    /// An error caused by `reply`.
    init(code: Code, message: String, reply: SMTPReply) {
        self.init(
            code: code,
            message: message,
            replyCode: reply.code,
            enhancedStatusCode: reply.enhancedStatusCode,
            replyText: reply.sanitizedText
        )
    }

    /// A local failure that retrying cannot fix (configuration).
    static func permanent(_ code: Code, _ message: String, detail: String? = nil) -> SMTPError {
        var error = SMTPError(code: code, message: message, detail: detail)
        error.permanentOverride = true
        return error
    }

    public var description: String {
        var text = "SMTPError(\(self.code): \(self.message)"
        if let replyCode = self.replyCode { text += ", reply: \(replyCode)" }
        if let enhanced = self.enhancedStatusCode { text += " \(enhanced)" }
        if let detail = self.detail { text += ", detail: \(detail)" }
        return text + (self.isTransient ? ", transient)" : ", permanent)")
    }
}
