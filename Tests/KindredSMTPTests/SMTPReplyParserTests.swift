import NIOCore
import Testing

@testable import KindredSMTP

@Suite struct SMTPReplyParserTests {
    private func replies(_ chunks: String...) throws(SMTPError) -> [SMTPReply] {
        var parser = SMTPReplyParser()
        var replies: [SMTPReply] = []
        for chunk in chunks {
            parser.append(chunk)
            while let reply = try parser.next() { replies.append(reply) }
        }
        return replies
    }

    @Test func singleLine() throws {
        #expect(
            try self.replies("220 mx.example.test ESMTP ready\r\n") == [
                SMTPReply(code: 220, lines: ["mx.example.test ESMTP ready"])
            ]
        )
    }

    @Test func multiLineSplitAcrossReads() throws {
        let replies = try self.replies("250-mx.exam", "ple.test\r\n250-PIPELINING\r", "\n250 8BITMIME\r\n354 go\r\n")
        #expect(
            replies == [
                SMTPReply(code: 250, lines: ["mx.example.test", "PIPELINING", "8BITMIME"]),
                SMTPReply(code: 354, lines: ["go"]),
            ]
        )
    }

    @Test func bareCodeAndBareLF() throws {
        #expect(
            try self.replies("250\n221 bye\n") == [
                SMTPReply(code: 250, lines: [""]), SMTPReply(code: 221, lines: ["bye"]),
            ]
        )
    }

    @Test func incompleteReplyWaits() throws {
        var parser = SMTPReplyParser()
        parser.append("250-first\r\n250 sec")
        #expect(try parser.next() == nil)
        #expect(parser.hasBufferedInput)
        parser.append("ond\r\n")
        #expect(try parser.next() == SMTPReply(code: 250, lines: ["first", "second"]))
        #expect(!parser.hasBufferedInput)
    }

    @Test(arguments: [
        "hello\r\n", "25\r\n", "2500 x\r\n", "250x\r\n", "600 x\r\n", "199 x\r\n", "260 x\r\n", "250-a\r\n251 b\r\n",
    ])
    func malformedRepliesAreProtocolErrors(input: String) {
        do {
            _ = try self.replies(input)
            Issue.record("accepted \(input.debugDescription)")
        } catch {
            #expect(error.code == .protocolError)
        }
    }

    @Test func overlongLinesAreRefused() {
        #expect(throws: SMTPError.self) { try self.replies("250 " + String(repeating: "x", count: 5000)) }
        #expect(throws: SMTPError.self) { try self.replies("250 " + String(repeating: "x", count: 5000) + "\r\n") }
        #expect(throws: SMTPError.self) {
            try self.replies(String(repeating: "250-x\r\n", count: 300) + "250 x\r\n")
        }
    }

    @Test(arguments: [
        ("5.1.1 <x@y>: user unknown", "5.1.1"),
        ("4.7.0 try later", "4.7.0"),
        ("2.0.0 OK", "2.0.0"),
        ("5.1.1", "5.1.1"),
        ("user unknown", nil),
        ("5.1 nope", nil),
        ("6.1.1 nope", nil),
        ("5.1234.1 nope", nil),
    ])
    func enhancedStatusCodes(text: String, expected: String?) {
        #expect(SMTPReply(code: 550, lines: [text]).enhancedStatusCode == expected)
    }

    @Test func sanitizedTextDropsControlsAndIsCapped() {
        let reply = SMTPReply(code: 550, lines: ["bad\u{1b}[31m", String(repeating: "y", count: 1000)])
        #expect(!reply.sanitizedText.contains("\u{1b}"))
        #expect(reply.sanitizedText.count == 512)
    }

    @Test func ehloCapabilities() throws {
        let reply = try #require(
            try self.replies(
                "250-mx.example.test greets you\r\n250-SIZE 35882577\r\n250-8bitmime\r\n250-AUTH LOGIN plain XOAUTH2\r\n"
                    + "250-AUTH=CRAM-MD5\r\n250-STARTTLS\r\n250-ENHANCEDSTATUSCODES\r\n250-PIPELINING\r\n250 SMTPUTF8\r\n"
            ).first
        )
        let capabilities = SMTPCapabilities(ehloReply: reply)
        #expect(capabilities.startTLS)
        #expect(capabilities.authMechanisms == ["LOGIN", "PLAIN", "XOAUTH2", "CRAM-MD5"])
        #expect(capabilities.maximumSize == 35_882_577)
        #expect(capabilities.eightBitMIME && capabilities.enhancedStatusCodes && capabilities.pipelining)
        #expect(capabilities.smtpUTF8)

        // The greeting line is not a capability; a bare 250 has none.
        let bare = SMTPCapabilities(ehloReply: SMTPReply(code: 250, lines: ["STARTTLS"]))
        #expect(!bare.startTLS && bare.authMechanisms.isEmpty && bare.maximumSize == nil)
    }
}
