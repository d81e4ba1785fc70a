import Foundation
import Testing

@testable import KindredSMTP

@Suite struct SMTPMessageTests {
    private func message(
        subject: String = "Hello",
        text: String = "Body\n",
        html: String? = nil,
        headers: [SMTPMessage.Header] = []
    ) -> SMTPMessage {
        SMTPMessage(
            from: SMTPMessage.Mailbox("noreply@kindred.test", displayName: "Kindred"),
            to: [SMTPMessage.Mailbox("ada@example.test")],
            subject: subject,
            textBody: text,
            htmlBody: html,
            messageID: "outbox-7@kindred.test",
            date: Date(timeIntervalSince1970: 0),
            headers: headers
        )
    }

    @Test func rendersAPlainMessage() throws {
        let encoded = try self.message().encoded()
        #expect(encoded.envelopeFrom == "noreply@kindred.test")
        #expect(encoded.recipients == ["ada@example.test"])
        let expected: [String] = [
            "Date: Thu, 01 Jan 1970 00:00:00 +0000",
            "From: Kindred <noreply@kindred.test>",
            "To: ada@example.test",
            "Message-ID: <outbox-7@kindred.test>",
            "Subject: Hello",
            "MIME-Version: 1.0",
            "Content-Type: text/plain; charset=utf-8",
            "Content-Transfer-Encoding: 7bit",
            "",
            "Body",
            "",
        ]
        #expect(String(decoding: encoded.content, as: UTF8.self) == expected.joined(separator: "\r\n"))
    }

    @Test func rendersMultipartAlternative() throws {
        let encoded = try self.message(text: "Hi", html: "<p>Hi</p>").encoded(boundary: "=_b")
        let text = String(decoding: encoded.content, as: UTF8.self)
        let expected: [String] = [
            "MIME-Version: 1.0",
            "Content-Type: multipart/alternative;",
            " boundary=\"=_b\"",
            "",
            "--=_b",
            "Content-Type: text/plain; charset=utf-8",
            "Content-Transfer-Encoding: quoted-printable",
            "",
            "Hi",
            "",
            "--=_b",
            "Content-Type: text/html; charset=utf-8",
            "Content-Transfer-Encoding: quoted-printable",
            "",
            "<p>Hi</p>",
            "",
            "--=_b--",
            "",
        ]
        #expect(text.hasSuffix(expected.joined(separator: "\r\n")))
    }

    @Test func everyLineIsCRLFTerminatedAndShort() throws {
        let body = String(repeating: "x", count: 5000) + "\n" + String(repeating: "ü", count: 3000) + "\r.\n"
        for html in [nil, body] {
            let encoded = try self.message(subject: String(repeating: "Grüße ", count: 40), text: body, html: html)
                .encoded()
            let content = encoded.content
            #expect(content.allSatisfy { $0 < 0x80 })
            #expect(content.suffix(2) == [0x0D, 0x0A])
            for line in MIMEEncoding.lines(content) {
                #expect(line.count <= 78)
                #expect(!line.contains(0x0D) && !line.contains(0x0A))
            }
        }
    }

    @Test(arguments: [
        "Hi\r\nBcc: victim@example.test",
        "Hi\nBcc: victim@example.test",
        "Hi\rBcc: victim@example.test",
        "Hi\u{85}Bcc",
        "Hi\u{2028}there",
        "nul\u{0}byte",
    ])
    func headerInjectionInTheSubjectIsRefused(subject: String) {
        #expect(throws: SMTPError.self) { try self.message(subject: subject).encoded() }
        do {
            _ = try self.message(subject: subject).encoded()
        } catch {
            #expect(error.code == .invalidMessage)
            #expect(!error.description.contains("victim"))
        }
    }

    @Test func headerInjectionElsewhereIsRefused() {
        var message = self.message()
        message.from.displayName = "Eve\r\nBcc: victim@example.test"
        #expect(throws: SMTPError.self) { try message.encoded() }

        message = self.message()
        message.to.append(SMTPMessage.Mailbox("x@example.test\r\nRCPT TO:<victim@example.test>"))
        #expect(throws: SMTPError.self) { try message.encoded() }

        message = self.message(headers: [SMTPMessage.Header("X-Tag", "a\r\nBcc: victim@example.test")])
        #expect(throws: SMTPError.self) { try message.encoded() }

        message = self.message(headers: [SMTPMessage.Header("X-Tag\r\nBcc", "x")])
        #expect(throws: SMTPError.self) { try message.encoded() }
    }

    @Test(arguments: ["Bcc", "to", "Content-Type", "MIME-Version", "Message-ID", "X Space", "", "Colon:"])
    func reservedOrInvalidHeaderNamesAreRefused(name: String) {
        #expect(throws: SMTPError.self) { try self.message(headers: [SMTPMessage.Header(name, "v")]).encoded() }
    }

    @Test(arguments: [
        "", "no-at-sign", "two@@example.test", "a@b@c", "@example.test", "user@", "with space@example.test",
        "<ada@example.test>", "ada@example.test>", "ümlaut@example.test", "a,b@example.test", "tab\t@example.test",
    ])
    func invalidAddressesAreRefused(address: String) {
        var message = self.message()
        message.to = [SMTPMessage.Mailbox(address)]
        #expect(throws: SMTPError.self) { try message.encoded() }
    }

    @Test(arguments: ["ada@example.test", "first.last+tag@sub.example.test", "x@xn--bcher-kva.example", "'q'@ex.test"])
    func validAddressesAreAccepted(address: String) throws {
        var message = self.message()
        message.to = [SMTPMessage.Mailbox(address)]
        #expect(try message.encoded().recipients == [address])
    }

    @Test(arguments: ["", "no-at", "<a@b>", "a b@c", "a@b@c", "@b", "a@"])
    func invalidMessageIDsAreRefused(id: String) {
        var message = self.message()
        message.messageID = id
        #expect(throws: SMTPError.self) { try message.encoded() }
    }

    @Test func noRecipientsIsRefused() {
        var message = self.message()
        message.to = []
        #expect(throws: SMTPError.self) { try message.encoded() }
    }

    @Test func extraHeadersAndReplyTo() throws {
        var message = self.message(headers: [
            SMTPMessage.Header("List-Unsubscribe", "<https://kindred.test/unsubscribe?t=abc>"),
            SMTPMessage.Header("X-Kindred-Kind", "verifizierung für Jörg"),
        ])
        message.replyTo = SMTPMessage.Mailbox("support@kindred.test", displayName: "Kindred Support")
        let text = String(decoding: try message.encoded().content, as: UTF8.self)
        #expect(text.contains("\r\nReply-To: Kindred Support <support@kindred.test>\r\n"))
        #expect(text.contains("\r\nList-Unsubscribe: <https://kindred.test/unsubscribe?t=abc>\r\n"))
        #expect(text.contains("\r\nX-Kindred-Kind: =?UTF-8?Q?verifizierung_f=C3=BCr_J=C3=B6rg?=\r\n"))
    }

    @Test func dataPayloadIsDotStuffedAndTerminated() throws {
        let payload = try self.message(text: ".leading dot\n.\nend").encoded().dataPayload
        #expect(String(decoding: payload, as: UTF8.self).hasSuffix("\r\n\r\n..leading dot\r\n..\r\nend\r\n.\r\n"))
    }
}
