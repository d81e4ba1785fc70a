/// The client side of an SMTP session (RFC 5321, STARTTLS RFC 3207, AUTH RFC 4954) for a batch
/// of messages over one connection, without I/O: events go in, one ``Action`` comes out.
///
/// greeting 220 → EHLO (HELO if EHLO is refused and nothing needs extensions) → STARTTLS and
/// EHLO again if configured → AUTH PLAIN or LOGIN if credentials are set → per message:
/// MAIL FROM, RCPT TO for each recipient, DATA, content → QUIT. A message that is refused is
/// recorded as failed and, if another follows, the transaction is reset with RSET. A message is
/// sent only if every recipient is accepted, so a retry never delivers twice to some of them.
struct SMTPStateMachine {
    enum Action: Equatable {
        /// Write this command.
        case send(SMTPCommand)
        /// Write the DATA payload of message `index` (dot-stuffed, terminated).
        case sendContent(index: Int)
        /// Insert TLS below the SMTP handler now (after STARTTLS was accepted) and report
        /// ``SMTPStateMachine/tlsEstablished()`` once the handshake completes.
        case startTLS
        /// Nothing to do until the next event.
        case wait
        /// Close the connection: every message has its outcome.
        case close
    }

    struct Settings: Sendable {
        var security: SMTPConfiguration.Security
        var credentials: SMTPConfiguration.Credentials?
        var allowInsecureAuth: Bool
        var heloDomain: String

        init(_ configuration: SMTPConfiguration) {
            self.security = configuration.security
            self.credentials = configuration.credentials
            self.allowInsecureAuth = configuration.allowInsecureAuth
            self.heloDomain = configuration.heloDomain
        }

        init(
            security: SMTPConfiguration.Security,
            credentials: SMTPConfiguration.Credentials? = nil,
            allowInsecureAuth: Bool = false,
            heloDomain: String = "localhost"
        ) {
            self.security = security
            self.credentials = credentials
            self.allowInsecureAuth = allowInsecureAuth
            self.heloDomain = heloDomain
        }
    }

    private enum LoginStep {
        case username, password, done
    }

    private enum State {
        case greeting
        case ehlo
        case helo
        case startTLS
        case tlsHandshake
        case authPlain
        case authLogin(LoginStep)
        case mailFrom(message: Int)
        case rcptTo(message: Int, recipient: Int)
        case data(message: Int)
        case content(message: Int)
        case reset
        case quit
        case closed
    }

    private let settings: Settings
    /// Recipient addresses and content sizes of the messages, in order.
    private let messages: [(envelopeFrom: String, recipients: [String], size: Int)]
    private var state = State.greeting
    private(set) var capabilities = SMTPCapabilities()
    /// Whether the connection is encrypted (implicit TLS or a completed STARTTLS).
    private(set) var isTLS = false
    /// Each message's outcome, nil while undecided.
    private(set) var outcomes: [Result<Void, SMTPError>?]

    init(settings: Settings, messages: [EncodedMessage]) {
        self.settings = settings
        self.messages = messages.map { ($0.envelopeFrom, $0.recipients, $0.content.count) }
        self.outcomes = Array(repeating: nil, count: messages.count)
    }

    var isFinished: Bool {
        if case .closed = self.state { return true }
        return false
    }

    /// The command (if any) whose reply is awaited, for logs.
    var awaitedVerb: String {
        switch self.state {
        case .greeting: "greeting"
        case .ehlo: "EHLO"
        case .helo: "HELO"
        case .startTLS: "STARTTLS"
        case .tlsHandshake: "TLS handshake"
        case .authPlain, .authLogin: "AUTH"
        case .mailFrom: "MAIL"
        case .rcptTo: "RCPT"
        case .data: "DATA"
        case .content: "content"
        case .reset: "RSET"
        case .quit: "QUIT"
        case .closed: "none"
        }
    }

    // MARK: Events

    /// With implicit TLS: the handshake completed before the greeting.
    /// After STARTTLS: the handshake completed; the session starts over with EHLO.
    mutating func tlsEstablished() -> Action {
        switch self.state {
        case .greeting:
            self.isTLS = true
            return .wait
        case .tlsHandshake:
            self.isTLS = true
            // RFC 3207 §4.2: forget everything learned before TLS.
            self.capabilities = SMTPCapabilities()
            self.state = .ehlo
            return .send(.ehlo(domain: self.settings.heloDomain))
        default:
            return self.failSession(SMTPError(code: .protocolError, message: "unexpected TLS handshake"), quit: false)
        }
    }

    /// The connection failed, timed out or closed: undecided messages fail with `error`.
    mutating func connectionFailed(_ error: SMTPError) -> Action {
        if case .closed = self.state { return .wait }
        if case .quit = self.state {
            self.state = .closed
            return .close
        }
        return self.failSession(error, quit: false)
    }

    mutating func replyReceived(_ reply: SMTPReply) -> Action {
        if reply.code == 421, !self.isQuitting {
            // RFC 5321 §3.8: the server is shutting this connection down, at any point.
            return self.failSession(
                SMTPError(code: .connectionFailed, message: "server closed the session", reply: reply),
                quit: false
            )
        }
        switch self.state {
        case .greeting:
            guard reply.code == 220 else {
                return self.failSession(
                    SMTPError(code: .connectionFailed, message: "server refused the session", reply: reply),
                    quit: true
                )
            }
            self.state = .ehlo
            return .send(.ehlo(domain: self.settings.heloDomain))

        case .ehlo:
            guard reply.isPositiveCompletion else {
                if reply.code >= 500, self.canUseHELO {
                    self.state = .helo
                    return .send(.helo(domain: self.settings.heloDomain))
                }
                return self.failSession(
                    SMTPError(code: .protocolError, message: "server refused EHLO", reply: reply),
                    quit: true
                )
            }
            self.capabilities = SMTPCapabilities(ehloReply: reply)
            return self.afterGreeting()

        case .helo:
            guard reply.isPositiveCompletion else {
                return self.failSession(
                    SMTPError(code: .protocolError, message: "server refused HELO", reply: reply),
                    quit: true
                )
            }
            return self.afterGreeting()

        case .startTLS:
            guard reply.code == 220 else {
                return self.failSession(
                    SMTPError(code: .tlsFailed, message: "server refused STARTTLS", reply: reply),
                    quit: true
                )
            }
            self.state = .tlsHandshake
            return .startTLS

        case .tlsHandshake:
            return self.failSession(
                SMTPError(code: .protocolError, message: "reply during the TLS handshake"),
                quit: false
            )

        case .authPlain:
            if reply.code == 235 { return self.startNextMessage() }
            if reply.code == 504, self.capabilities.authMechanisms.contains("LOGIN") {
                self.state = .authLogin(.username)
                return .send(.authLogin)
            }
            return self.authenticationFailed(reply)

        case .authLogin(let step):
            guard let credentials = self.settings.credentials else {
                preconditionFailure("AUTH started without credentials")
            }
            switch (step, reply.code) {
            case (.username, 334):
                self.state = .authLogin(.password)
                return .send(.authResponse(MIMEEncoding.base64(credentials.username)))
            case (.password, 334):
                self.state = .authLogin(.done)
                return .send(.authResponse(MIMEEncoding.base64(credentials.password)))
            case (.done, 235):
                return self.startNextMessage()
            case (_, 334), (_, 235):
                return self.failSession(
                    SMTPError(code: .protocolError, message: "unexpected reply to AUTH LOGIN", reply: reply),
                    quit: true
                )
            default:
                return self.authenticationFailed(reply)
            }

        case .mailFrom(let index):
            guard reply.isPositiveCompletion else {
                return self.failMessage(
                    index,
                    SMTPError(code: .rejectedSender, message: "server refused the sender", reply: reply),
                    inTransaction: true
                )
            }
            self.state = .rcptTo(message: index, recipient: 0)
            return .send(.rcptTo(address: self.messages[index].recipients[0]))

        case .rcptTo(let index, let recipient):
            // 251 "user not local; will forward" is a success too.
            guard reply.isPositiveCompletion else {
                return self.failMessage(
                    index,
                    SMTPError(code: .rejectedRecipient, message: "server refused a recipient", reply: reply),
                    inTransaction: true
                )
            }
            let next = recipient + 1
            if next < self.messages[index].recipients.count {
                self.state = .rcptTo(message: index, recipient: next)
                return .send(.rcptTo(address: self.messages[index].recipients[next]))
            }
            self.state = .data(message: index)
            return .send(.data)

        case .data(let index):
            guard reply.code == 354 else {
                return self.failMessage(
                    index,
                    SMTPError(code: .messageRejected, message: "server refused DATA", reply: reply),
                    inTransaction: true
                )
            }
            self.state = .content(message: index)
            return .sendContent(index: index)

        case .content(let index):
            guard reply.isPositiveCompletion else {
                // The transaction is over after the reply to the final dot, accepted or not.
                return self.failMessage(
                    index,
                    SMTPError(code: .messageRejected, message: "server refused the message", reply: reply),
                    inTransaction: false
                )
            }
            self.outcomes[index] = .success(())
            return self.startNextMessage()

        case .reset:
            guard reply.isPositiveCompletion else {
                return self.failSession(
                    SMTPError(code: .protocolError, message: "server refused RSET", reply: reply),
                    quit: true
                )
            }
            return self.startNextMessage()

        case .quit:
            self.state = .closed
            return .close

        case .closed:
            return .wait
        }
    }

    // MARK: Steps

    private var isQuitting: Bool {
        switch self.state {
        case .quit, .closed: true
        default: false
        }
    }

    /// HELO carries no extensions: only usable when neither STARTTLS nor AUTH is needed.
    private var canUseHELO: Bool {
        guard self.settings.credentials == nil else { return false }
        switch self.settings.security {
        case .none, .implicitTLS: return true
        case .startTLS(let required): return !required && !self.isTLS
        }
    }

    /// After a successful EHLO or HELO: STARTTLS, AUTH or the first message.
    private mutating func afterGreeting() -> Action {
        if case .startTLS(let required) = self.settings.security, !self.isTLS {
            if self.capabilities.startTLS {
                self.state = .startTLS
                return .send(.startTLS)
            }
            if required {
                return self.failSession(
                    SMTPError(code: .tlsFailed, message: "server does not offer STARTTLS"),
                    quit: true
                )
            }
        }
        guard let credentials = self.settings.credentials else {
            return self.startNextMessage()
        }
        guard self.isTLS || self.settings.allowInsecureAuth else {
            // Only reachable with optional STARTTLS that the server did not offer (an attacker
            // may have stripped it): ``SMTPClient`` refuses credentials with `.none` up front.
            return self.failSession(
                SMTPError(code: .tlsFailed, message: "refusing to send credentials without TLS"),
                quit: true
            )
        }
        if self.capabilities.authMechanisms.contains("PLAIN") {
            self.state = .authPlain
            let response = MIMEEncoding.base64("\u{0}\(credentials.username)\u{0}\(credentials.password)")
            return .send(.authPlain(initialResponse: response))
        }
        if self.capabilities.authMechanisms.contains("LOGIN") {
            self.state = .authLogin(.username)
            return .send(.authLogin)
        }
        return self.failSession(
            SMTPError.permanent(.authenticationFailed, "server offers neither AUTH PLAIN nor AUTH LOGIN"),
            quit: true
        )
    }

    private mutating func authenticationFailed(_ reply: SMTPReply) -> Action {
        if reply.isPositiveIntermediate {
            return self.failSession(
                SMTPError(code: .protocolError, message: "unexpected AUTH challenge", reply: reply),
                quit: true
            )
        }
        return self.failSession(
            SMTPError(code: .authenticationFailed, message: "server refused the credentials", reply: reply),
            quit: true
        )
    }

    /// MAIL FROM for the next undecided message, or QUIT when none is left.
    private mutating func startNextMessage() -> Action {
        guard let index = self.outcomes.firstIndex(where: { $0 == nil }) else {
            self.state = .quit
            return .send(.quit)
        }
        let message = self.messages[index]
        if let maximum = self.capabilities.maximumSize, maximum > 0, message.size > maximum {
            self.outcomes[index] = .failure(
                SMTPError.permanent(.messageRejected, "message is larger than the server's SIZE limit")
            )
            return self.startNextMessage()
        }
        self.state = .mailFrom(message: index)
        let size = self.capabilities.maximumSize != nil ? message.size : nil
        return .send(.mailFrom(address: message.envelopeFrom, size: size))
    }

    /// Records the failure of one message, then goes on with the next (after RSET if a
    /// transaction is open) or quits.
    private mutating func failMessage(_ index: Int, _ error: SMTPError, inTransaction: Bool) -> Action {
        self.outcomes[index] = .failure(error)
        guard self.outcomes.contains(where: { $0 == nil }) else {
            self.state = .quit
            return .send(.quit)
        }
        guard inTransaction else { return self.startNextMessage() }
        self.state = .reset
        return .send(.reset)
    }

    /// Fails every undecided message, then says goodbye if the connection is still usable.
    private mutating func failSession(_ error: SMTPError, quit: Bool) -> Action {
        for index in self.outcomes.indices where self.outcomes[index] == nil {
            self.outcomes[index] = .failure(error)
        }
        if quit {
            self.state = .quit
            return .send(.quit)
        }
        self.state = .closed
        return .close
    }
}
