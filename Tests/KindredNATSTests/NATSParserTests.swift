import NIOCore
import Testing

@testable import KindredNATS

@Suite struct NATSParserTests {
    private func operations(_ text: String, parser: inout NATSParser) throws -> [NATSServerOperation] {
        parser.append(Array(text.utf8))
        var operations: [NATSServerOperation] = []
        while let operation = try parser.next() { operations.append(operation) }
        return operations
    }

    private func operations(_ text: String) throws -> [NATSServerOperation] {
        var parser = NATSParser()
        return try self.operations(text, parser: &parser)
    }

    @Test func controlOperations() throws {
        let parsed = try self.operations("PING\r\nPONG\r\n+OK\r\n-ERR 'Authorization Violation'\r\nINFO {\"max_payload\":1024}\r\n")
        #expect(parsed.count == 5)
        #expect(parsed[0] == .ping && parsed[1] == .pong && parsed[2] == .ok)
        #expect(parsed[3] == .error("Authorization Violation"))
        #expect(parsed[4] == .info(Array("{\"max_payload\":1024}".utf8)))
    }

    @Test func messageWithAndWithoutReply() throws {
        let parsed = try self.operations("MSG a.b 7 5\r\nhello\r\nMSG a.c 8 _INBOX.x.1 0\r\n\r\n")
        #expect(parsed == [
            .message(NATSMessage(subject: "a.b", replyTo: nil, headers: nil, payload: Array("hello".utf8), sid: 7)),
            .message(NATSMessage(subject: "a.c", replyTo: "_INBOX.x.1", headers: nil, payload: [], sid: 8)),
        ])
    }

    @Test func messageWithHeadersAndStatus() throws {
        let block = "NATS/1.0\r\nNats-Msg-Id: e1\r\nX: a: b\r\n\r\n"
        let parsed = try self.operations("HMSG s 3 r \(block.utf8.count) \(block.utf8.count + 2)\r\n\(block)hi\r\n")
        guard case .message(let message)? = parsed.first else { Issue.record("no message"); return }
        #expect(message.headers?["nats-msg-id"] == "e1")
        #expect(message.headers?["X"] == "a: b")
        #expect(message.payload == Array("hi".utf8))
        #expect(message.replyTo == "r")
        let status = "NATS/1.0 408 Request Timeout\r\n\r\n"
        let timeout = try self.operations("HMSG _INBOX.a.1 1 \(status.utf8.count) \(status.utf8.count)\r\n\(status)\r\n")
        guard case .message(let expired)? = timeout.first else { Issue.record("no status"); return }
        #expect(expired.status == 408)
        #expect(expired.headers?.statusDescription == "Request Timeout")
        #expect(expired.payload.isEmpty)
    }

    /// A message split anywhere comes out whole once its last byte arrived, and not before.
    @Test func splitAcrossReads() throws {
        let text = "MSG a 1 r 3\r\nabc\r\nPING\r\n"
        for cut in 1..<text.utf8.count {
            var parser = NATSParser()
            let bytes = Array(text.utf8)
            parser.append(Array(bytes[..<cut]))
            var parsed: [NATSServerOperation] = []
            while let operation = try parser.next() { parsed.append(operation) }
            parser.append(Array(bytes[cut...]))
            while let operation = try parser.next() { parsed.append(operation) }
            #expect(parsed.count == 2, "cut at \(cut)")
        }
    }

    @Test(arguments: [
        "MSG a 1\r\n",  // no size
        "MSG a x 3\r\nabc\r\n",  // sid not a number
        "MSG a 1 -3\r\nabc\r\n",  // signed size
        "MSG a 1 3\r\nabcd\r\n",  // payload not followed by CRLF
        "HMSG a 1 20 10\r\n",  // header block larger than the message
        "HMSG a 1 4 4\r\nab\r\n\r\n",  // header block shorter than NATS/1.0
        "HMSG a 1 12 12\r\nHTTP/1.0\r\n\r\n\r\n",  // not a NATS header block
        "HMSG a 1 15 15\r\nNATS/1.0 4x\r\n\r\n\r\n",  // a status that is not three digits
        "HMSG a 1 16 16\r\nNATS/1.0 053\r\n\r\n\r\n",  // a status with a leading zero (53, not three digits)
        "MSG a 1 r s 3\r\nabc\r\n",  // too many fields
        "BOGUS\r\n",
        "p\u{131}ng\r\n",  // a verb with a dotless i, which Unicode upper-cases to PING
        "INFO nope\r\n",
        "MSG a 1 9999999999999999999999\r\n",
    ])
    func malformedInputIsRefused(text: String) {
        #expect(throws: NATSProtocolError.self) { _ = try self.operations(text) }
    }

    @Test func limits() throws {
        var parser = NATSParser(maxControlLine: 64, maxPayload: 16)
        #expect(throws: NATSProtocolError(.tooLarge, "a message of 17 bytes exceeds 16")) {
            _ = try self.operations("MSG a 1 17\r\n", parser: &parser)
        }
        var lines = NATSParser(maxControlLine: 64, maxPayload: 16)
        // Without a line end: refused once longer than the limit, not buffered for ever.
        #expect(throws: NATSProtocolError.self) {
            _ = try self.operations("MSG " + String(repeating: "a", count: 80), parser: &lines)
        }
        // A line of exactly the limit split between its CR and its LF waits for the LF.
        var split = NATSParser(maxControlLine: 10, maxPayload: 16)
        #expect(try self.operations("MSG ab 1 0\r", parser: &split).isEmpty)
        #expect(try self.operations("\n\r\n", parser: &split).count == 1)
        var exact = NATSParser(maxControlLine: 64, maxPayload: 16)
        #expect(try self.operations("MSG a 1 16\r\n0123456789abcdef\r\n", parser: &exact).count == 1)
    }

    @Test func headersRoundTrip() throws {
        var headers = NATSHeaders()
        headers.add("Nats-Msg-Id", "0192-ab")
        let parsed = try NATSHeaders.parse(headers.encoded)
        #expect(parsed == headers)
        #expect(String(decoding: headers.encoded, as: UTF8.self) == "NATS/1.0\r\nNats-Msg-Id: 0192-ab\r\n\r\n")
    }

    @Test func ackSubjects() {
        let plain = NATSMessage(
            subject: "kindred.match.3.swipe", replyTo: "$JS.ACK.KINDRED_MATCH.chat-3.2.41.7.1700000000000000000.5",
            headers: nil, payload: [])
        let message = JetStreamMessage(plain)
        #expect(message?.stream == "KINDRED_MATCH" && message?.consumer == "chat-3")
        #expect(message?.deliveries == 2 && message?.streamSequence == 41 && message?.consumerSequence == 7)
        #expect(message?.pending == 5)
        let domain = NATSMessage(
            subject: "s", replyTo: "$JS.ACK.hub.ACCHASH.S.C.1.2.3.4.0.token", headers: nil, payload: [])
        #expect(JetStreamMessage(domain)?.stream == "S")
        #expect(JetStreamMessage(NATSMessage(subject: "s", replyTo: "$JS.ACK.S.C.x", headers: nil, payload: [])) == nil)
        #expect(JetStreamMessage(NATSMessage(subject: "s", replyTo: nil, headers: nil, payload: [])) == nil)
    }

    @Test func serverLists() {
        #expect(NATSServerAddress.parseList("nats://127.0.0.1:4222, 10.0.0.2:5000,nats") == [
            NATSServerAddress(host: "127.0.0.1", port: 4222), NATSServerAddress(host: "10.0.0.2", port: 5000),
            NATSServerAddress(host: "nats", port: 4222),
        ])
        #expect(NATSServerAddress.parseList("") == nil)
        #expect(NATSServerAddress.parseList("nats://h:0") == nil)
        #expect(NATSServerAddress.parseList("nats://user:pw@h:1") == nil)
        #expect(NATSServerAddress.parseList("h:x") == nil)
    }
}
