import Foundation
import KindredSMTP
import Logging
import Testing

/// End-to-end: the client against a real SMTP server (aiosmtpd, `python/smtp_sink.py`), whose
/// recorded messages Python's email package decodes.
@Suite("SMTPClient against aiosmtpd")
struct SMTPClientTests {
    static let sender = SMTPMessage.Mailbox("noreply@kindred.test", displayName: "Kindred")
    static let password = "correct horse battery staple"

    func message(
        to: [SMTPMessage.Mailbox] = [SMTPMessage.Mailbox("ada@example.test", displayName: "Ada Lovelace")],
        subject: String = "Verify your email",
        text: String = "Your code is 123456.\n",
        html: String? = nil,
        id: String = "outbox-1@kindred.test"
    ) -> SMTPMessage {
        SMTPMessage(
            from: Self.sender,
            to: to,
            subject: subject,
            textBody: text,
            htmlBody: html,
            messageID: id,
            date: Date(timeIntervalSince1970: 1_767_225_600),  // 2026-01-01T00:00:00Z
            headers: [SMTPMessage.Header("Auto-Submitted", "auto-generated")]
        )
    }

    func client(
        port: Int,
        security: SMTPConfiguration.Security = .none,
        trustRoots: String? = nil,
        credentials: SMTPConfiguration.Credentials? = nil,
        commandTimeout: Duration = .seconds(5),
        logger: Logger = Logger(label: "kindred.smtp.test")
    ) throws -> SMTPClient {
        let roots = try trustRoots ?? TestPKI.get().caCertificate
        return try SMTPClient(
            configuration: SMTPConfiguration(
                host: "127.0.0.1",
                port: port,
                security: security,
                trustRoots: .file(roots),
                credentials: credentials,
                heloDomain: "app.kindred.test",
                connectTimeout: .seconds(2),
                commandTimeout: commandTimeout
            ),
            logger: logger
        )
    }

    func expectSMTPError(
        _ code: SMTPError.Code,
        transient: Bool,
        sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () async throws -> Void
    ) async -> SMTPError? {
        do {
            try await body()
            Issue.record("expected \(code), but the message was sent", sourceLocation: sourceLocation)
            return nil
        } catch let error as SMTPError {
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
            #expect(error.isTransient == transient, "\(error)", sourceLocation: sourceLocation)
            return error
        } catch {
            Issue.record("expected SMTPError, got \(error)", sourceLocation: sourceLocation)
            return nil
        }
    }

    // MARK: Delivery

    @Test func plainMessageArrivesWithEnvelopeAndHeaders() async throws {
        try await SMTPSink.with { sink in
            try await self.client(port: sink.port).send(self.message())
            let delivered = try sink.delivered()
            try #require(delivered.count == 1)
            let mail = delivered[0]
            #expect(mail.mailFrom == "noreply@kindred.test")
            #expect(mail.rcptTos == ["ada@example.test"])
            #expect(!mail.tls)
            #expect(mail.mailOptions.contains { $0.hasPrefix("SIZE=") })
            let parsed = try #require(mail.parsed, "\(mail.parseError ?? "")")
            #expect(parsed.defects == [])
            #expect(parsed.from == [.init(name: "Kindred", address: "noreply@kindred.test")])
            #expect(parsed.to == [.init(name: "Ada Lovelace", address: "ada@example.test")])
            #expect(parsed.subject == "Verify your email")
            #expect(parsed.messageId == "<outbox-1@kindred.test>")
            #expect(parsed.date == "Thu, 01 Jan 2026 00:00:00 +0000")
            #expect(parsed.dateUtc == "2026-01-01T00:00:00+00:00")
            #expect(parsed.headers["MIME-Version"] == "1.0")
            #expect(parsed.headers["Auto-Submitted"] == "auto-generated")
            #expect(parsed.contentType == "text/plain")
            #expect(parsed.parts == [.init(type: "text/plain", encoding: "7bit")])
            #expect(parsed.text == "Your code is 123456.\n")
            #expect(!parsed.bareLf && !parsed.eightBit && parsed.maxLineLength <= 78)
        }
    }

    @Test func nonASCIISubjectAndDisplayNamesRoundTrip() async throws {
        let subject = "Grüße aus Köln — bitte bestätige deine E-Mail-Adresse für Kindred 💘 (gültig 24 h)"
        let recipients = [
            SMTPMessage.Mailbox("taro@example.test", displayName: "山田 太郎"),
            SMTPMessage.Mailbox("john@example.test", displayName: "Doe, John \"JD\""),
        ]
        var message = self.message(to: recipients, subject: subject, text: "Hallo Jörg,\nschön, dass du da bist.\n")
        message.from = SMTPMessage.Mailbox("noreply@kindred.test", displayName: "Jörg Müller-Lüdenscheidt")
        try await SMTPSink.with { sink in
            try await self.client(port: sink.port).send(message)
            let mail = try #require(try sink.delivered().first)
            let parsed = try #require(mail.parsed, "\(mail.parseError ?? "")")
            #expect(parsed.defects == [])
            #expect(parsed.subjectEmailHeader == subject)
            #expect(parsed.subject == subject)
            #expect(parsed.fromEmailHeader == "Jörg Müller-Lüdenscheidt <noreply@kindred.test>")
            #expect(parsed.from == [.init(name: "Jörg Müller-Lüdenscheidt", address: "noreply@kindred.test")])
            #expect(
                parsed.to == [
                    .init(name: "山田 太郎", address: "taro@example.test"),
                    .init(name: "Doe, John \"JD\"", address: "john@example.test"),
                ]
            )
            #expect(parsed.text == "Hallo Jörg,\nschön, dass du da bist.\n")
            #expect(parsed.parts == [.init(type: "text/plain", encoding: "quoted-printable")])
            // Everything on the wire is 7-bit, folded to 78 columns.
            #expect(!parsed.eightBit && !parsed.bareLf && parsed.maxLineLength <= 78)
        }
    }

    @Test func linesStartingWithDotsArriveIntact() async throws {
        let text = ".\n..\n.hidden line\nnormal\n. \n...\nlast line without newline ."
        try await SMTPSink.with { sink in
            try await self.client(port: sink.port).send(self.message(text: text))
            let mail = try #require(try sink.delivered().first)
            #expect(mail.parsed?.text == text + "\n")
            #expect(mail.raw.contains("\r\n.hidden line\r\n"))
        }
    }

    @Test func multipleRecipientsGetOneMessage() async throws {
        let recipients = (1...3).map { SMTPMessage.Mailbox("user\($0)@example.test") }
        try await SMTPSink.with { sink in
            try await self.client(port: sink.port).send(self.message(to: recipients))
            let delivered = try sink.delivered()
            try #require(delivered.count == 1)
            #expect(delivered[0].rcptTos == recipients.map(\.address))
            #expect(delivered[0].parsed?.to.map(\.address) == recipients.map(\.address))
        }
    }

    @Test func htmlAlternativeAndLongLinesRoundTrip() async throws {
        let longLine = String(repeating: "wörter und noch mehr ", count: 80)  // ~1,700 bytes on one line
        let text = "Hallo!\n\(longLine)\nEnde.\n"
        let html = "<p>Hallo <b>Jörg</b>!</p>\n<p>\(longLine)</p>\n"
        try await SMTPSink.with { sink in
            try await self.client(port: sink.port).send(self.message(text: text, html: html))
            let mail = try #require(try sink.delivered().first)
            let parsed = try #require(mail.parsed, "\(mail.parseError ?? "")")
            #expect(parsed.defects == [])
            #expect(parsed.contentType == "multipart/alternative")
            #expect(
                parsed.parts == [
                    .init(type: "text/plain", encoding: "quoted-printable"),
                    .init(type: "text/html", encoding: "quoted-printable"),
                ]
            )
            #expect(parsed.text == text)
            #expect(parsed.html == html)
            #expect(parsed.maxLineLength <= 78)
        }
    }

    @Test func batchReusesTheConnectionAndResetsAfterARefusal() async throws {
        var invalid = self.message(id: "outbox-3@kindred.test")
        invalid.subject = "Hi\r\nBcc: victim@example.test"
        let messages = [
            self.message(id: "outbox-1@kindred.test"),
            self.message(to: [SMTPMessage.Mailbox("nobody@example.test")], id: "outbox-2@kindred.test"),
            invalid,
            self.message(id: "outbox-4@kindred.test"),
        ]
        try await SMTPSink.with(SMTPSink.Options(rejectRecipients: ["nobody@example.test"])) { sink in
            let results = try await self.client(port: sink.port).send(messages)
            #expect(results.count == 4)
            #expect((try? results[0].get()) != nil)
            #expect(results[1].failure?.code == .rejectedRecipient)
            #expect(results[2].failure?.code == .invalidMessage)
            #expect((try? results[3].get()) != nil)
            #expect(
                try sink.delivered().compactMap(\.parsed?.messageId) == [
                    "<outbox-1@kindred.test>", "<outbox-4@kindred.test>",
                ]
            )
        }
    }

    // MARK: TLS and AUTH

    @Test func startTLSWithTheTestCA() async throws {
        try await SMTPSink.with(SMTPSink.Options(startTLS: true, requireSTARTTLS: true)) { sink in
            try await self.client(port: sink.port, security: .startTLS(required: true)).send(self.message())
            let delivered = try sink.delivered()
            try #require(delivered.count == 1)
            #expect(delivered[0].tls)
        }
    }

    @Test func startTLSWithAnUntrustedCAFails() async throws {
        let otherCA = try TestPKI.get().otherCACertificate
        try await SMTPSink.with(SMTPSink.Options(startTLS: true, requireSTARTTLS: true)) { sink in
            let client = try self.client(port: sink.port, security: .startTLS(required: true), trustRoots: otherCA)
            let error = await self.expectSMTPError(.tlsFailed, transient: true) {
                try await client.send(self.message())
            }
            #expect(error?.detail?.contains("certificate") == true, "\(String(describing: error))")
            #expect(try sink.delivered().isEmpty)
        }
    }

    @Test func requiredSTARTTLSThatIsNotOfferedFails() async throws {
        try await SMTPSink.with { sink in
            let client = try self.client(port: sink.port, security: .startTLS(required: true))
            _ = await self.expectSMTPError(.tlsFailed, transient: true) { try await client.send(self.message()) }
            #expect(try sink.delivered().isEmpty)
        }
    }

    @Test func optionalSTARTTLSFallsBackToPlainText() async throws {
        try await SMTPSink.with { sink in
            try await self.client(port: sink.port, security: .startTLS(required: false)).send(self.message())
            #expect(try sink.delivered().map(\.tls) == [false])
        }
    }

    @Test func implicitTLS() async throws {
        try await SMTPSink.with(SMTPSink.Options(implicitTLS: true)) { sink in
            try await self.client(port: sink.port, security: .implicitTLS).send(self.message())
            #expect(try sink.delivered().map(\.tls) == [true])
        }
    }

    @Test(arguments: [[], ["PLAIN"]])
    func authOverSTARTTLS(excluding mechanisms: [String]) async throws {
        let options = SMTPSink.Options(
            startTLS: true,
            requireSTARTTLS: true,
            auth: ("kindred", Self.password),
            excludeAuth: mechanisms
        )
        try await SMTPSink.with(options) { sink in
            let credentials = SMTPConfiguration.Credentials(username: "kindred", password: Self.password)
            try await self.client(port: sink.port, security: .startTLS(required: true), credentials: credentials)
                .send(self.message())
            #expect(try sink.delivered().map(\.authUser) == ["kindred"])
        }
    }

    @Test func wrongPasswordIsAPermanentAuthenticationFailure() async throws {
        let options = SMTPSink.Options(startTLS: true, requireSTARTTLS: true, auth: ("kindred", Self.password))
        let recorder = LogRecorder()
        try await SMTPSink.with(options) { sink in
            let credentials = SMTPConfiguration.Credentials(username: "kindred", password: "wrong-Pa55word")
            let client = try self.client(
                port: sink.port,
                security: .startTLS(required: true),
                credentials: credentials,
                logger: recorder.logger()
            )
            let error = await self.expectSMTPError(.authenticationFailed, transient: false) {
                try await client.send(self.message())
            }
            #expect(error?.replyCode == 535)
            #expect(error.map { "\($0)" }?.contains("wrong-Pa55word") == false)
            #expect(try sink.delivered().isEmpty)
        }
        #expect(!recorder.lines.isEmpty)
        #expect(!recorder.lines.contains { $0.contains("wrong-Pa55word") || $0.contains("123456") })
        #expect(recorder.lines.contains { $0.contains("smtp.host=127.0.0.1") && $0.contains("smtp.reply.code=535") })
    }

    @Test func credentialsWithoutTLSAreRefusedUpFront() throws {
        let credentials = SMTPConfiguration.Credentials(username: "kindred", password: Self.password)
        #expect(throws: SMTPError.self) {
            _ = try SMTPClient(
                configuration: SMTPConfiguration(host: "127.0.0.1", security: .none, credentials: credentials),
                logger: Logger(label: "test")
            )
        }
        let configuration = SMTPConfiguration(host: "127.0.0.1", credentials: credentials)
        #expect(!"\(configuration)".contains(Self.password))
        #expect(!String(reflecting: configuration).contains(Self.password))
    }

    // MARK: Refusals and failures

    @Test func rejectedRecipientIsPermanent() async throws {
        try await SMTPSink.with(SMTPSink.Options(rejectRecipients: ["nobody@example.test"])) { sink in
            let client = try self.client(port: sink.port)
            let recipients = [SMTPMessage.Mailbox("ada@example.test"), SMTPMessage.Mailbox("nobody@example.test")]
            let error = await self.expectSMTPError(.rejectedRecipient, transient: false) {
                try await client.send(self.message(to: recipients))
            }
            #expect(error?.replyCode == 550)
            #expect(error?.enhancedStatusCode == "5.1.1")
            // All or nothing: the accepted recipient did not get it either.
            #expect(try sink.delivered().isEmpty)
        }
    }

    @Test func greylistedRecipientIsTransient() async throws {
        try await SMTPSink.with(SMTPSink.Options(tempfailRecipients: ["later@example.test"])) { sink in
            let client = try self.client(port: sink.port)
            let error = await self.expectSMTPError(.rejectedRecipient, transient: true) {
                try await client.send(self.message(to: [SMTPMessage.Mailbox("later@example.test")]))
            }
            #expect(error?.replyCode == 450)
        }
    }

    @Test func rejectedSenderIsPermanent() async throws {
        try await SMTPSink.with(SMTPSink.Options(rejectSenders: ["noreply@kindred.test"])) { sink in
            let client = try self.client(port: sink.port)
            _ = await self.expectSMTPError(.rejectedSender, transient: false) { try await client.send(self.message()) }
        }
    }

    @Test func serverNotListeningIsATransientConnectionFailure() async throws {
        let client = try self.client(port: try unusedPort())
        _ = await self.expectSMTPError(.connectionFailed, transient: true) { try await client.send(self.message()) }
    }

    @Test func headerInjectionFailsBeforeConnecting() async throws {
        // Nothing listens on the port: had the client connected, it would report connectionFailed.
        let client = try self.client(port: try unusedPort())
        let injected = self.message(subject: "Hello\r\nBcc: victim@example.test")
        let error = await self.expectSMTPError(.invalidMessage, transient: false) { try await client.send(injected) }
        #expect(error.map { "\($0)" }?.contains("victim") == false)
    }

    @Test func silentServerTimesOut() async throws {
        let peer = try await ScriptedPeer(greeting: nil)
        defer { Task { try? await peer.stop() } }
        let client = try self.client(port: peer.port, commandTimeout: .milliseconds(300))
        _ = await self.expectSMTPError(.timeout, transient: true) { try await client.send(self.message()) }
    }

    @Test func dataPipelinedAfterTheSTARTTLSReplyIsRefused() async throws {
        let peer = try await ScriptedPeer(
            greeting: "220 evil.test ESMTP\r\n",
            replies: [
                "EHLO": "250-evil.test\r\n250 STARTTLS\r\n",
                // The second line would be read as the first reply inside TLS.
                "STARTTLS": "220 2.0.0 go ahead\r\n250-injected\r\n",
                "QUIT": "221 bye\r\n",
            ]
        )
        defer { Task { try? await peer.stop() } }
        let client = try self.client(port: peer.port, security: .startTLS(required: true))
        _ = await self.expectSMTPError(.tlsFailed, transient: true) { try await client.send(self.message()) }
    }

    @Test func greetingRefusalIsReported() async throws {
        let peer = try await ScriptedPeer(greeting: "554 5.3.2 no service here\r\n", replies: ["QUIT": "221 bye\r\n"])
        defer { Task { try? await peer.stop() } }
        let client = try self.client(port: peer.port)
        let error = await self.expectSMTPError(.connectionFailed, transient: false) {
            try await client.send(self.message())
        }
        #expect(error?.replyCode == 554)
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
