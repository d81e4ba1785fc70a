@testable import KindredHTTP2
import NIOCore
import Testing

/// Records what a session reports.
private final class Recorder: HTTP2SessionDelegate {
    var headers: [(Int32, [HTTP2Header], Bool)] = []
    var data: [Int32: [UInt8]] = [:]
    var ended: [Int32] = []
    var closed: [(Int32, HTTP2ErrorCode)] = []
    var pings = 0
    var goAway: HTTP2ErrorCode?
    var consumeImmediately = true
    var observed: [HTTP2PeerEvent] = []

    func http2Session(_ session: HTTP2Session, didReceiveHeaders headers: [HTTP2Header], streamID: Int32, endStream: Bool) {
        self.headers.append((streamID, headers, endStream))
    }
    func http2Session(_ session: HTTP2Session, didReceiveData bytes: UnsafeRawBufferPointer, streamID: Int32) {
        self.data[streamID, default: []].append(contentsOf: bytes)
        if self.consumeImmediately { session.consume(streamID: streamID, count: bytes.count) }
    }
    func http2Session(_ session: HTTP2Session, didReceiveEndStream streamID: Int32) { self.ended.append(streamID) }
    func http2Session(_ session: HTTP2Session, streamClosed streamID: Int32, errorCode: HTTP2ErrorCode) {
        self.closed.append((streamID, errorCode))
    }
    func http2Session(_ session: HTTP2Session, didReceivePing ack: Bool, payload: UInt64) { self.pings += 1 }
    func http2Session(_ session: HTTP2Session, didReceiveGoAway lastStreamID: Int32, errorCode: HTTP2ErrorCode) {
        self.goAway = errorCode
    }
    func http2Session(_ session: HTTP2Session, didSendData count: Int, streamID: Int32, pendingBytes: Int) {}
    func http2Session(_ session: HTTP2Session, observed event: HTTP2PeerEvent, streamID: Int32) {
        self.observed.append(event)
    }
}

/// A raw frame (RFC 9113 §4.1), for peers that misbehave on purpose.
private func rawFrame(type: UInt8, flags: UInt8 = 0, stream: UInt32, payload: [UInt8] = []) -> [UInt8] {
    let length = UInt32(payload.count)
    return [UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff), type, flags,
            UInt8(stream >> 24 & 0x7f), UInt8(stream >> 16 & 0xff), UInt8(stream >> 8 & 0xff), UInt8(stream & 0xff)]
        + payload
}

@Suite struct HTTP2PeerEventTests {
    private static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + rawFrame(type: 4, stream: 0)

    @Test(arguments: [
        ("empty DATA", rawFrame(type: 0, stream: 0, payload: []), [HTTP2PeerEvent]()),  // stream 0 DATA: invalid
        ("WINDOW_UPDATE +1", rawFrame(type: 8, stream: 0, payload: [0, 0, 0, 1]), [.smallWindowUpdate]),
        ("WINDOW_UPDATE +64 KiB", rawFrame(type: 8, stream: 0, payload: [0, 1, 0, 0]), []),
        ("SETTINGS", rawFrame(type: 4, stream: 0), [.settings]),
        ("SETTINGS ACK", rawFrame(type: 4, flags: 1, stream: 0), []),
        ("PRIORITY", rawFrame(type: 2, stream: 3, payload: [0, 0, 0, 0, 16]), [.priority]),
    ])
    func framesAreObserved(name: String, bytes: [UInt8], expected: [HTTP2PeerEvent]) throws {
        let events = Recorder()
        let server = try HTTP2Session(role: .server)
        server.delegate = events
        try server.receive(ByteBuffer(bytes: Self.preface))
        #expect(events.observed == [.settings])
        events.observed = []
        try? server.receive(ByteBuffer(bytes: bytes))
        if name == "empty DATA" {
            #expect(events.observed == [.invalidFrame] || events.observed.isEmpty)
        } else {
            #expect(events.observed == expected, "\(name)")
        }
    }

    @Test func emptyDataOnAnOpenStreamIsObservedButNotTheLastFrame() throws {
        let clientEvents = Recorder()
        let serverEvents = Recorder()
        let client = try HTTP2Session(role: .client)
        let server = try HTTP2Session(role: .server)
        client.delegate = clientEvents
        server.delegate = serverEvents
        let stream = try client.submitRequest(headers: [
            .init(":method", "POST"), .init(":scheme", "http"), .init(":path", "/a/B"), .init(":authority", "t"),
        ])
        try pump(client, server)
        serverEvents.observed = []
        try server.receive(ByteBuffer(bytes: rawFrame(type: 0, stream: UInt32(stream)) + rawFrame(type: 0, stream: UInt32(stream))))
        #expect(serverEvents.observed == [.emptyData, .emptyData])
        // An empty DATA frame with END_STREAM is how many clients end a request: not a glitch.
        try server.receive(ByteBuffer(bytes: rawFrame(type: 0, flags: 1, stream: UInt32(stream))))
        #expect(serverEvents.observed == [.emptyData, .emptyData])
        #expect(serverEvents.ended == [stream])
    }

    @Test func pendingOutboundBytesCountAllStreams() throws {
        let client = try HTTP2Session(role: .client)
        let server = try HTTP2Session(role: .server)
        let events = Recorder()
        server.delegate = events
        let first = try client.submitRequest(headers: [
            .init(":method", "POST"), .init(":scheme", "http"), .init(":path", "/a/B"), .init(":authority", "t"),
        ])
        let second = try client.submitRequest(headers: [
            .init(":method", "POST"), .init(":scheme", "http"), .init(":path", "/a/B"), .init(":authority", "t"),
        ])
        try pump(client, server)
        for stream in [first, second] {
            try server.submitResponse(streamID: stream, headers: [.init(":status", "200")], endStream: false)
        }
        server.sendData(streamID: first, ByteBuffer(bytes: Array(repeating: 1, count: 100_000)))
        server.sendData(streamID: first, ByteBuffer(bytes: Array(repeating: 1, count: 1_000)))
        server.sendData(streamID: second, ByteBuffer(bytes: Array(repeating: 2, count: 50_000)))
        #expect(server.pendingOutboundBytes == 151_000)
        // A reset stream's queue is dropped from the count; what nghttp2 takes leaves it.
        server.resetStream(streamID: first, errorCode: .cancel)
        #expect(server.pendingOutboundBytes == 50_000)
        try pump(client, server)
        #expect(server.pendingOutboundBytes == 0)
    }

    @Test func writeStopsAtTheLimit() throws {
        let server = try HTTP2Session(role: .server)
        // 500 PINGs queue 500 PING ACKs (17 bytes each).
        var pings: [UInt8] = Self.preface
        for _ in 0..<500 { pings += rawFrame(type: 6, stream: 0, payload: Array(repeating: 0, count: 8)) }
        try server.receive(ByteBuffer(bytes: pings))
        var first = ByteBuffer()
        try server.write(into: &first, limit: 1024)
        #expect(first.readableBytes >= 1024 && first.readableBytes < 1024 + 100)
        var rest = ByteBuffer()
        try server.write(into: &rest)
        #expect(first.readableBytes + rest.readableBytes > 500 * 17)
    }
}

/// Moves bytes between two in-memory sessions until both are quiet.
private func pump(_ a: HTTP2Session, _ b: HTTP2Session) throws {
    for _ in 0..<100 {
        var ab = ByteBuffer()
        var ba = ByteBuffer()
        let wroteA = try a.write(into: &ab)
        if wroteA { try b.receive(ab) }
        let wroteB = try b.write(into: &ba)
        if wroteB { try a.receive(ba) }
        if !wroteA && !wroteB { return }
    }
}

@Suite struct HTTP2SessionTests {
    private func requestHeaders(_ path: String = "/svc/Method") -> [HTTP2Header] {
        [.init(":method", "POST"), .init(":scheme", "http"), .init(":path", path), .init(":authority", "test"),
         .init("content-type", "application/grpc"), .init("te", "trailers")]
    }

    @Test func requestResponseWithTrailers() throws {
        let clientEvents = Recorder()
        let serverEvents = Recorder()
        let client = try HTTP2Session(role: .client)
        let server = try HTTP2Session(role: .server)
        client.delegate = clientEvents
        server.delegate = serverEvents

        let stream = try client.submitRequest(headers: self.requestHeaders())
        client.sendData(streamID: stream, ByteBuffer(bytes: [1, 2, 3]))
        client.finish(streamID: stream, trailers: nil)
        try pump(client, server)
        #expect(serverEvents.headers.first?.1.first(where: { $0.name == ":path" })?.value == "/svc/Method")
        #expect(serverEvents.data[stream] == [1, 2, 3])
        #expect(serverEvents.ended == [stream])

        try server.submitResponse(streamID: stream, headers: [.init(":status", "200")], endStream: false)
        server.sendData(streamID: stream, ByteBuffer(bytes: Array(repeating: 9, count: 100_000)))
        server.finish(streamID: stream, trailers: [.init("grpc-status", "0")])
        try pump(client, server)
        #expect(clientEvents.headers.count == 2)
        #expect(clientEvents.headers[1].1 == [.init("grpc-status", "0")])
        #expect(clientEvents.headers[1].2)
        #expect(clientEvents.data[stream]?.count == 100_000)
        #expect(clientEvents.closed.map(\.1) == [.noError])
    }

    /// A value new on every request (a deadline) sent without indexing stays out of both ends' HPACK tables, and
    /// arrives as sent; indexed, every one would be inserted at both ends.
    @Test(arguments: [false, true])
    func fieldsSentWithoutIndexingStayOutOfTheTables(indexed: Bool) throws {
        let client = try HTTP2Session(role: .client)
        let server = try HTTP2Session(role: .server)
        let serverEvents = Recorder()
        server.delegate = serverEvents
        var sizes: [Int] = []
        for index in 0..<20 {
            let stream = try client.submitRequest(
                headers: self.requestHeaders() + [.init("grpc-timeout", "\(1_000 + index)m", indexed: indexed)])
            client.finish(streamID: stream, trailers: nil)
            try pump(client, server)
            #expect(serverEvents.headers.last?.1.last == HTTP2Header("grpc-timeout", "\(1_000 + index)m"))
            let tables = client.headerTableSizes
            #expect(tables.encoder == server.headerTableSizes.decoder)
            sizes.append(tables.encoder)
        }
        // RFC 7541 §4.1: an entry's size is its name's and value's lengths plus 32.
        let growth = sizes[19] - sizes[0]
        #expect(growth == (indexed ? 19 * ("grpc-timeout".count + "1000m".count + 32) : 0), "table sizes: \(sizes)")
    }

    @Test func unconsumedDataStopsTheSender() throws {
        let serverEvents = Recorder()
        serverEvents.consumeImmediately = false
        var configuration = HTTP2Configuration()
        configuration.initialStreamWindowSize = 65_535
        let client = try HTTP2Session(role: .client)
        let server = try HTTP2Session(role: .server, configuration: configuration)
        let clientEvents = Recorder()
        client.delegate = clientEvents
        server.delegate = serverEvents
        let stream = try client.submitRequest(headers: self.requestHeaders())
        client.sendData(streamID: stream, ByteBuffer(bytes: Array(repeating: 1, count: 1_000_000)))
        try pump(client, server)
        // Only one window's worth arrives while the receiver does not consume.
        #expect(serverEvents.data[stream]?.count == 65_535)
        #expect(client.pendingOutboundBytes(streamID: stream) == 1_000_000 - 65_535)
        server.consume(streamID: stream, count: 65_535)
        try pump(client, server)
        #expect(serverEvents.data[stream]?.count == 131_070)
    }

    @Test func oversizedHeaderListResetsOnlyThatStream() throws {
        let serverEvents = Recorder()
        let clientEvents = Recorder()
        var configuration = HTTP2Configuration()
        configuration.maxHeaderListSize = 1024
        let client = try HTTP2Session(role: .client)
        let server = try HTTP2Session(role: .server, configuration: configuration)
        client.delegate = clientEvents
        server.delegate = serverEvents
        let big = try client.submitRequest(headers: self.requestHeaders() + [.init("x-big", String(repeating: "a", count: 2000))])
        let small = try client.submitRequest(headers: self.requestHeaders())
        try pump(client, server)
        #expect(serverEvents.headers.map(\.0) == [small])
        #expect(clientEvents.closed.contains { $0.0 == big && $0.1 == .enhanceYourCalm })
    }

    @Test func garbageIsAConnectionError() throws {
        let server = try HTTP2Session(role: .server)
        let serverEvents = Recorder()
        server.delegate = serverEvents
        #expect(throws: HTTP2SessionError.self) {
            try server.receive(ByteBuffer(string: "GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
        }
    }

    @Test func goAwayIsReported() throws {
        let clientEvents = Recorder()
        let client = try HTTP2Session(role: .client)
        let server = try HTTP2Session(role: .server)
        let serverEvents = Recorder()
        client.delegate = clientEvents
        server.delegate = serverEvents
        try pump(client, server)
        server.goAway(errorCode: .enhanceYourCalm, debugData: "too_many_pings")
        try pump(client, server)
        #expect(clientEvents.goAway == .enhanceYourCalm)
    }
}
