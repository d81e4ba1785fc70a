import Testing

@testable import KindredSMTP

@Suite struct SMTPStateMachineTests {
    typealias Machine = SMTPStateMachine

    static let credentials = SMTPConfiguration.Credentials(username: "kindred", password: "s3cret")

    static func message(_ recipients: [String] = ["ada@example.test"], size: Int = 100) -> EncodedMessage {
        EncodedMessage(
            envelopeFrom: "noreply@kindred.test",
            recipients: recipients,
            content: Array(repeating: UInt8(ascii: "x"), count: size),
            messageID: "id@kindred.test"
        )
    }

    static func reply(_ code: Int, _ lines: String...) -> SMTPReply {
        SMTPReply(code: code, lines: lines.isEmpty ? ["ok"] : lines)
    }

    static let ehloPlain = reply(250, "mx.example.test", "SIZE 1000", "8BITMIME")
    static let ehloWithTLS = reply(250, "mx.example.test", "STARTTLS", "SIZE 1000")
    static let ehloAfterTLS = reply(250, "mx.example.test", "AUTH PLAIN LOGIN", "SIZE 1000")

    private func outcomes(_ machine: Machine) -> [SMTPError.Code?] {
        machine.outcomes.map { outcome in
            switch outcome {
            case .success?: nil
            case .failure(let error)?: error.code
            case nil: .protocolError  // undecided: never expected at the end
            }
        }
    }

    @Test func plainSessionWithoutExtensions() {
        var machine = Machine(settings: .init(security: .none, heloDomain: "app.test"), messages: [Self.message()])
        #expect(machine.replyReceived(Self.reply(220)) == .send(.ehlo(domain: "app.test")))
        #expect(machine.replyReceived(Self.ehloPlain) == .send(.mailFrom(address: "noreply@kindred.test", size: 100)))
        #expect(machine.replyReceived(Self.reply(250)) == .send(.rcptTo(address: "ada@example.test")))
        #expect(machine.replyReceived(Self.reply(250)) == .send(.data))
        #expect(machine.replyReceived(Self.reply(354)) == .sendContent(index: 0))
        #expect(machine.replyReceived(Self.reply(250)) == .send(.quit))
        #expect(machine.replyReceived(Self.reply(221)) == .close)
        #expect(machine.isFinished)
        #expect(self.outcomes(machine) == [nil])
    }

    @Test func startTLSThenAuthPlain() {
        var machine = Machine(
            settings: .init(security: .startTLS(required: true), credentials: Self.credentials),
            messages: [Self.message(["a@x.test", "b@x.test"])]
        )
        #expect(machine.replyReceived(Self.reply(220)) == .send(.ehlo(domain: "localhost")))
        #expect(machine.replyReceived(Self.ehloWithTLS) == .send(.startTLS))
        #expect(machine.replyReceived(Self.reply(220, "go ahead")) == .startTLS)
        #expect(!machine.isTLS)
        #expect(machine.tlsEstablished() == .send(.ehlo(domain: "localhost")))
        #expect(machine.isTLS)
        #expect(machine.capabilities == SMTPCapabilities(), "pre-TLS capabilities are forgotten")
        // base64("\0kindred\0s3cret")
        #expect(machine.replyReceived(Self.ehloAfterTLS) == .send(.authPlain(initialResponse: "AGtpbmRyZWQAczNjcmV0")))
        #expect(machine.replyReceived(Self.reply(235)) == .send(.mailFrom(address: "noreply@kindred.test", size: 100)))
        #expect(machine.replyReceived(Self.reply(250)) == .send(.rcptTo(address: "a@x.test")))
        #expect(machine.replyReceived(Self.reply(250)) == .send(.rcptTo(address: "b@x.test")))
        #expect(machine.replyReceived(Self.reply(251)) == .send(.data))
        #expect(machine.replyReceived(Self.reply(354)) == .sendContent(index: 0))
        #expect(machine.replyReceived(Self.reply(250)) == .send(.quit))
        #expect(machine.connectionFailed(SMTPError(code: .connectionFailed, message: "closed")) == .close)
        #expect(self.outcomes(machine) == [nil])
    }

    @Test func authLoginWhenPlainIsNotOffered() {
        var machine = Machine(
            settings: .init(security: .implicitTLS, credentials: Self.credentials),
            messages: [Self.message()]
        )
        #expect(machine.tlsEstablished() == .wait)
        #expect(machine.replyReceived(Self.reply(220)) == .send(.ehlo(domain: "localhost")))
        #expect(machine.replyReceived(Self.reply(250, "mx", "AUTH LOGIN")) == .send(.authLogin))
        #expect(machine.replyReceived(Self.reply(334, "VXNlcm5hbWU6")) == .send(.authResponse("a2luZHJlZA==")))
        #expect(machine.replyReceived(Self.reply(334, "UGFzc3dvcmQ6")) == .send(.authResponse("czNjcmV0")))
        #expect(machine.replyReceived(Self.reply(235)) == .send(.mailFrom(address: "noreply@kindred.test", size: nil)))
    }

    @Test func authPlainRefusedWith504FallsBackToLogin() {
        var machine = Machine(
            settings: .init(security: .implicitTLS, credentials: Self.credentials),
            messages: [Self.message()]
        )
        _ = machine.tlsEstablished()
        _ = machine.replyReceived(Self.reply(220))
        _ = machine.replyReceived(Self.reply(250, "mx", "AUTH PLAIN LOGIN"))
        #expect(machine.replyReceived(Self.reply(504)) == .send(.authLogin))
    }

    @Test(arguments: [(535, false), (454, true)])
    func authenticationRefused(code: Int, transient: Bool) {
        var machine = Machine(
            settings: .init(security: .implicitTLS, credentials: Self.credentials),
            messages: [Self.message()]
        )
        _ = machine.tlsEstablished()
        _ = machine.replyReceived(Self.reply(220))
        _ = machine.replyReceived(Self.ehloAfterTLS)
        #expect(machine.replyReceived(Self.reply(code, "5.7.8 nope")) == .send(.quit))
        guard case .failure(let error)? = machine.outcomes[0] else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.code == .authenticationFailed)
        #expect(error.isTransient == transient)
        #expect(!error.description.contains("s3cret"))
    }

    @Test func credentialsAreNotSentWhenSTARTTLSIsMissing() {
        var machine = Machine(
            settings: .init(security: .startTLS(required: false), credentials: Self.credentials),
            messages: [Self.message()]
        )
        _ = machine.replyReceived(Self.reply(220))
        #expect(machine.replyReceived(Self.ehloAfterTLS) == .send(.quit))
        #expect(self.outcomes(machine) == [.tlsFailed])
    }

    @Test func requiredSTARTTLSMissing() {
        var machine = Machine(settings: .init(security: .startTLS(required: true)), messages: [Self.message()])
        _ = machine.replyReceived(Self.reply(220))
        #expect(machine.replyReceived(Self.ehloPlain) == .send(.quit))
        #expect(self.outcomes(machine) == [.tlsFailed])
    }

    @Test func optionalSTARTTLSMissingGoesOnInPlainText() {
        var machine = Machine(settings: .init(security: .startTLS(required: false)), messages: [Self.message()])
        _ = machine.replyReceived(Self.reply(220))
        #expect(machine.replyReceived(Self.ehloPlain) == .send(.mailFrom(address: "noreply@kindred.test", size: 100)))
    }

    @Test func heloFallbackOnlyWithoutExtensions() {
        var plain = Machine(settings: .init(security: .none), messages: [Self.message()])
        _ = plain.replyReceived(Self.reply(220))
        #expect(plain.replyReceived(Self.reply(502, "5.5.1 EHLO not implemented")) == .send(.helo(domain: "localhost")))
        #expect(plain.replyReceived(Self.reply(250)) == .send(.mailFrom(address: "noreply@kindred.test", size: nil)))

        var tls = Machine(settings: .init(security: .startTLS(required: true)), messages: [Self.message()])
        _ = tls.replyReceived(Self.reply(220))
        #expect(tls.replyReceived(Self.reply(502)) == .send(.quit))
        #expect(self.outcomes(tls) == [.protocolError])
    }

    @Test func refusedRecipientResetsAndTheNextMessageGoesOn() {
        var machine = Machine(
            settings: .init(security: .none),
            messages: [Self.message(["a@x.test", "gone@x.test"]), Self.message(["b@x.test"])]
        )
        _ = machine.replyReceived(Self.reply(220))
        _ = machine.replyReceived(Self.ehloPlain)
        _ = machine.replyReceived(Self.reply(250))  // MAIL
        #expect(machine.replyReceived(Self.reply(250)) == .send(.rcptTo(address: "gone@x.test")))
        #expect(machine.replyReceived(Self.reply(550, "5.1.1 unknown")) == .send(.reset))
        #expect(machine.replyReceived(Self.reply(250)) == .send(.mailFrom(address: "noreply@kindred.test", size: 100)))
        _ = machine.replyReceived(Self.reply(250))
        _ = machine.replyReceived(Self.reply(250))
        _ = machine.replyReceived(Self.reply(354))
        #expect(machine.replyReceived(Self.reply(250)) == .send(.quit))
        #expect(self.outcomes(machine) == [.rejectedRecipient, nil])
        if case .failure(let error)? = machine.outcomes[0] {
            #expect(error.replyCode == 550 && error.enhancedStatusCode == "5.1.1" && !error.isTransient)
        }
    }

    @Test func refusedContentNeedsNoReset() {
        var machine = Machine(settings: .init(security: .none), messages: [Self.message(), Self.message()])
        _ = machine.replyReceived(Self.reply(220))
        _ = machine.replyReceived(Self.ehloPlain)
        _ = machine.replyReceived(Self.reply(250))
        _ = machine.replyReceived(Self.reply(250))
        _ = machine.replyReceived(Self.reply(354))
        #expect(
            machine.replyReceived(Self.reply(554, "5.7.1 spam"))
                == .send(.mailFrom(address: "noreply@kindred.test", size: 100))
        )
        #expect(self.outcomes(machine).first == .messageRejected)
    }

    @Test func messagesOverTheSizeLimitAreNotSent() {
        var machine = Machine(settings: .init(security: .none), messages: [Self.message(size: 5000), Self.message()])
        _ = machine.replyReceived(Self.reply(220))
        #expect(machine.replyReceived(Self.ehloPlain) == .send(.mailFrom(address: "noreply@kindred.test", size: 100)))
        #expect(self.outcomes(machine).first == .messageRejected)
    }

    @Test func serviceClosingAnywhereFailsEverything() {
        var machine = Machine(settings: .init(security: .none), messages: [Self.message(), Self.message()])
        _ = machine.replyReceived(Self.reply(220))
        _ = machine.replyReceived(Self.ehloPlain)
        #expect(machine.replyReceived(Self.reply(421, "4.3.2 shutting down")) == .close)
        #expect(self.outcomes(machine) == [.connectionFailed, .connectionFailed])
        #expect(machine.outcomes.allSatisfy { (try? $0?.get()) == nil })
        if case .failure(let error)? = machine.outcomes[0] { #expect(error.isTransient) }
    }

    @Test func greetingRefused() {
        var machine = Machine(settings: .init(security: .none), messages: [Self.message()])
        #expect(machine.replyReceived(Self.reply(554, "no")) == .send(.quit))
        #expect(self.outcomes(machine) == [.connectionFailed])
    }

    @Test func connectionLostKeepsEarlierSuccesses() {
        var machine = Machine(settings: .init(security: .none), messages: [Self.message(), Self.message()])
        _ = machine.replyReceived(Self.reply(220))
        _ = machine.replyReceived(Self.ehloPlain)
        _ = machine.replyReceived(Self.reply(250))
        _ = machine.replyReceived(Self.reply(250))
        _ = machine.replyReceived(Self.reply(354))
        _ = machine.replyReceived(Self.reply(250))
        #expect(machine.connectionFailed(SMTPError(code: .timeout, message: "slow")) == .close)
        #expect(self.outcomes(machine) == [nil, .timeout])
        #expect(machine.connectionFailed(SMTPError(code: .connectionFailed, message: "again")) == .wait)
    }

    @Test func unexpectedEventsAreProtocolErrors() {
        var early = Machine(settings: .init(security: .startTLS(required: true)), messages: [Self.message()])
        _ = early.replyReceived(Self.reply(220))
        #expect(early.tlsEstablished() == .close)
        #expect(self.outcomes(early) == [.protocolError])

        var duringHandshake = Machine(settings: .init(security: .startTLS(required: true)), messages: [Self.message()])
        _ = duringHandshake.replyReceived(Self.reply(220))
        _ = duringHandshake.replyReceived(Self.ehloWithTLS)
        _ = duringHandshake.replyReceived(Self.reply(220))
        #expect(duringHandshake.replyReceived(Self.reply(250)) == .close)
        #expect(self.outcomes(duringHandshake) == [.protocolError])
    }

    @Test func commandLines() {
        #expect(SMTPCommand.mailFrom(address: "a@b", size: 12).line == "MAIL FROM:<a@b> SIZE=12\r\n")
        #expect(SMTPCommand.rcptTo(address: "a@b").line == "RCPT TO:<a@b>\r\n")
        #expect(SMTPCommand.authPlain(initialResponse: "c2VjcmV0").description == "AUTH")
        #expect(SMTPCommand.authResponse("c2VjcmV0").description == "AUTH-RESPONSE")
    }

    @Test(
        arguments: [
            (nil, SMTPError.Code.connectionFailed, true),
            (nil, .timeout, true),
            (nil, .tlsFailed, true),
            (nil, .invalidMessage, false),
            (nil, .authenticationFailed, false),
            (450, .rejectedRecipient, true),
            (550, .rejectedRecipient, false),
            (421, .connectionFailed, true),
            (554, .connectionFailed, false),
        ] as [(Int?, SMTPError.Code, Bool)]
    )
    func transience(replyCode: Int?, code: SMTPError.Code, transient: Bool) {
        #expect(SMTPError(code: code, message: "m", replyCode: replyCode).isTransient == transient)
    }

    @Test func errorDescriptionOmitsReplyText() {
        let error = SMTPError(
            code: .rejectedRecipient,
            message: "server refused a recipient",
            reply: Self.reply(550, "5.1.1 <ada@example.test> unknown")
        )
        #expect(
            error.description == "SMTPError(rejectedRecipient: server refused a recipient, reply: 550 5.1.1, permanent)"
        )
        #expect(error.replyText == "5.1.1 <ada@example.test> unknown")
    }
}
