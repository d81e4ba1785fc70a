import KindredHTTP2
import KindredProtobuf
import NIOCore
import Testing

@testable import KindredGRPC

@Suite struct EncodingTests {
    @Test(arguments: [
        ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"),
        ("foobar", "Zm9vYmFy"),
    ])
    func base64RoundTrip(plain: String, encoded: String) {
        #expect(Base64.encode(Array(plain.utf8), padding: false) == encoded)
        #expect(Base64.decode(encoded) == Array(plain.utf8))
        let padded = Base64.encode(Array(plain.utf8), padding: true)
        #expect(padded.count % 4 == 0)
        #expect(Base64.decode(padded) == Array(plain.utf8))
    }

    @Test(arguments: ["Zm9v!", "Z", "Zm9vY"])
    func base64RejectsInvalid(text: String) {
        #expect(Base64.decode(text) == nil)
    }

    @Test(arguments: [
        ("plain text", "plain text"), ("100%", "100%25"), ("héllo", "h%C3%A9llo"), ("a\nb", "a%0Ab"),
        ("✗", "%E2%9C%97"),
    ])
    func percentEncoding(message: String, wire: String) {
        #expect(PercentEncoding.encode(message) == wire)
        #expect(PercentEncoding.decode(wire) == message)
    }

    @Test func percentDecodingIsLenient() {
        #expect(PercentEncoding.decode("50%") == "50%")
        #expect(PercentEncoding.decode("%zz") == "%zz")
        #expect(PercentEncoding.decode("%4") == "%4")
    }

    @Test(arguments: [
        ("1H", Duration.seconds(3600)), ("2M", .seconds(120)), ("3S", .seconds(3)), ("40m", .milliseconds(40)),
        ("500u", .microseconds(500)), ("99999999n", .nanoseconds(99_999_999)),
    ])
    func timeoutParsing(text: String, duration: Duration) {
        #expect(GRPCTimeout.parse(text) == duration)
    }

    @Test(arguments: ["", "S", "1", "123456789S", "1s", "-1S", "1.5S", "1 S"])
    func malformedTimeouts(text: String) {
        #expect(GRPCTimeout.parse(text) == nil)
    }

    @Test(arguments: [Duration.milliseconds(250), .seconds(30), .seconds(86400 * 365), .nanoseconds(7), .microseconds(123_456_789)])
    func timeoutFormattingRoundTripsWithoutShortening(duration: Duration) throws {
        let text = GRPCTimeout.format(duration)
        #expect(text.count <= 9)
        let parsed = try #require(GRPCTimeout.parse(text))
        #expect(parsed >= duration)
    }

    @Test func expiredTimeoutFormatsAsOneNanosecond() {
        #expect(GRPCTimeout.format(.zero) == "1n")
        #expect(GRPCTimeout.format(.seconds(-5)) == "1n")
    }
}

@Suite struct MessageDeframerTests {
    private func frame(_ payload: [UInt8], flag: UInt8 = 0) -> [UInt8] {
        let count = UInt32(payload.count)
        return [flag, UInt8(count >> 24), UInt8(count >> 16 & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count & 0xFF)]
            + payload
    }

    @Test func splitsMessagesAcrossArbitraryChunks() throws {
        let messages: [[UInt8]] = [[], [1], Array(repeating: 7, count: 300), [1, 2, 3]]
        let wire = messages.flatMap { frame($0) }
        for chunkSize in [1, 2, 5, 7, 64, wire.count] {
            var deframer = MessageDeframer(maxMessageSize: 1024)
            var received: [[UInt8]] = []
            var offset = 0
            while offset < wire.count {
                let end = min(offset + chunkSize, wire.count)
                wire[offset..<end].withUnsafeBytes { deframer.append($0, allocator: ByteBufferAllocator()) }
                while let message = try deframer.next() { received.append(Array(message.readableBytesView)) }
                offset = end
            }
            #expect(received == messages)
            #expect(!deframer.hasPartialMessage)
        }
    }

    @Test func rejectsOversizedMessageFromThePrefixAlone() {
        var deframer = MessageDeframer(maxMessageSize: 10)
        let header: [UInt8] = [0, 0, 0, 0, 11]
        header.withUnsafeBytes { deframer.append($0, allocator: ByteBufferAllocator()) }
        #expect(throws: MessageDeframer.Failure.messageTooLarge(length: 11, limit: 10)) { try deframer.next() }
    }

    @Test func acceptsMessageExactlyAtTheLimit() throws {
        var deframer = MessageDeframer(maxMessageSize: 10)
        frame(Array(repeating: 1, count: 10)).withUnsafeBytes { deframer.append($0, allocator: ByteBufferAllocator()) }
        #expect(try deframer.next()?.readableBytes == 10)
    }

    @Test func rejectsCompressedAndInvalidFlags() {
        var compressed = MessageDeframer(maxMessageSize: 10)
        frame([1], flag: 1).withUnsafeBytes { compressed.append($0, allocator: ByteBufferAllocator()) }
        #expect(throws: MessageDeframer.Failure.compressedWithoutEncoding) { try compressed.next() }
        var invalid = MessageDeframer(maxMessageSize: 10)
        frame([1], flag: 9).withUnsafeBytes { invalid.append($0, allocator: ByteBufferAllocator()) }
        #expect(throws: MessageDeframer.Failure.invalidFlag(9)) { try invalid.next() }
    }

    @Test func reportsTruncation() throws {
        var deframer = MessageDeframer(maxMessageSize: 100)
        let partial: [UInt8] = [0, 0, 0, 0, 16, 1, 2]
        partial.withUnsafeBytes { deframer.append($0, allocator: ByteBufferAllocator()) }
        #expect(try deframer.next() == nil)
        #expect(deframer.hasPartialMessage)
    }
}

@Suite struct MetadataTests {
    @Test func reservedAndInvalidEntriesAreNotSent() {
        var metadata: Metadata = ["x-ok": "yes", "grpc-status": "0", "content-type": "text/plain", "x-bad": "line\nbreak"]
        metadata.add(":path", "/evil")
        metadata.add("x-data-bin", binary: [0, 255])
        metadata.add("X-Upper", "lowered")
        var headers: [KindredHTTP2.HTTP2Header] = []
        metadata.appendHeaders(to: &headers)
        #expect(headers.map(\.name) == ["x-ok", "x-data-bin", "x-upper"])
        #expect(headers[1].value == "AP8")
    }

    @Test func receivedBinaryValuesAreDecodedAndSplit() {
        let metadata = Metadata(headers: [
            .init("x-a-bin", "AP8=, AQ"), .init("x-b", "text"), .init("grpc-timeout", "1S"), .init("x-c-bin", "!!"),
        ])
        #expect(metadata.count == 3)
        #expect(metadata["x-b"] == "text")
        #expect(metadata.binary("x-a-bin") == [0, 255])
        #expect(metadata.entries.filter { $0.key == "x-a-bin" }.count == 2)
    }
}
