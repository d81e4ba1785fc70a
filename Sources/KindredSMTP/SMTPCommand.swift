/// A command line the client sends. Arguments were validated before (addresses, domain), so
/// none contains CR or LF.
enum SMTPCommand: Sendable, Hashable {
    case ehlo(domain: String)
    case helo(domain: String)
    case startTLS
    /// `AUTH PLAIN` with the initial response (RFC 4616): base64 of NUL user NUL password.
    case authPlain(initialResponse: String)
    case authLogin
    /// A base64 line answering a 334 challenge (user name or password).
    case authResponse(String)
    case mailFrom(address: String, size: Int?)
    case rcptTo(address: String)
    case data
    case reset
    case quit

    /// The command word, the only part that may be logged.
    var verb: String {
        switch self {
        case .ehlo: "EHLO"
        case .helo: "HELO"
        case .startTLS: "STARTTLS"
        case .authPlain, .authLogin: "AUTH"
        case .authResponse: "AUTH-RESPONSE"
        case .mailFrom: "MAIL"
        case .rcptTo: "RCPT"
        case .data: "DATA"
        case .reset: "RSET"
        case .quit: "QUIT"
        }
    }

    /// The line as sent, CRLF included.
    var line: String {
        let text: String
        switch self {
        case .ehlo(let domain): text = "EHLO \(domain)"
        case .helo(let domain): text = "HELO \(domain)"
        case .startTLS: text = "STARTTLS"
        case .authPlain(let response): text = "AUTH PLAIN \(response)"
        case .authLogin: text = "AUTH LOGIN"
        case .authResponse(let response): text = response
        case .mailFrom(let address, let size):
            text = "MAIL FROM:<\(address)>" + (size.map { " SIZE=\($0)" } ?? "")
        case .rcptTo(let address): text = "RCPT TO:<\(address)>"
        case .data: text = "DATA"
        case .reset: text = "RSET"
        case .quit: text = "QUIT"
        }
        return text + "\r\n"
    }
}

extension SMTPCommand: CustomStringConvertible {
    /// The verb only: arguments can hold credentials or addresses.
    var description: String { self.verb }
}
