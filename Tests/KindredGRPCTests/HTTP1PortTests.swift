import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import KindredGRPC
@testable import KindredGRPCServices
import KindredInterop
import CoreMetrics

@Suite("HTTP/1.1 ports: a deadline on every phase of a connection, a cap on open connections")
struct HTTP1PortTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
    static let limits: HTTP1Limits = {
        var limits = HTTP1Limits(maxConnections: 4)
        limits.headerTimeout = .seconds(10)
        limits.bodyTimeout = .seconds(30)
        limits.idleTimeout = .seconds(60)
        return limits
    }()

    enum Event: Sendable {
        case bytes, head, end, responseEnd
    }

    @Test(
        "the phase and deadline after each event (seconds after the start; nil: none)",
        arguments: [
            // A new connection waits for its first header, even if it never sends a byte.
            ([], HTTP1ConnectionTimer.Phase.header, Optional(10)),
            // Bytes of a header do not move its deadline: a header trickled byte by byte still times out.
            ([.bytes, .bytes], .header, 10),
            ([.head], .body, 30),
            ([.head, .bytes], .body, 30),
            ([.head, .end], .answering, nil),
            ([.head, .end, .bytes], .answering, nil),
            ([.head, .end, .responseEnd], .idle, 60),
            // The next request's first byte starts its header deadline.
            ([.head, .end, .responseEnd, .bytes], .header, 10),
            ([.head, .end, .responseEnd, .bytes, .head], .body, 30),
            // A pipelined request held while the previous one was answered arrives as a head.
            ([.head, .end, .responseEnd, .head], .body, 30),
            // A response end out of turn (an error answer while reading) changes nothing.
            ([.head, .responseEnd], .body, 30),
        ] as [([Event], HTTP1ConnectionTimer.Phase, Int?)]
    )
    func phases(events: [Event], phase: HTTP1ConnectionTimer.Phase, deadline: Int?) {
        var timer = HTTP1ConnectionTimer(limits: Self.limits, openedAt: Self.start)
        // Each event one "second" later would blur the deadlines; all happen at the start.
        for event in events {
            switch event {
            case .bytes: timer.bytesReceived(now: Self.start)
            case .head: timer.headReceived(now: Self.start)
            case .end: timer.requestEnded()
            case .responseEnd: timer.responseEnded(now: Self.start)
            }
        }
        #expect(timer.phase == phase)
        #expect(timer.deadline == deadline.map { Self.start + .seconds(Int64($0)) })
    }

    @Test("expired names the phase's timeout, only once its deadline has passed")
    func expiry() {
        var timer = HTTP1ConnectionTimer(limits: Self.limits, openedAt: Self.start)
        #expect(timer.expired(now: Self.start + .seconds(9)) == nil)
        #expect(timer.expired(now: Self.start + .seconds(10)) == .header)
        timer.headReceived(now: Self.start)
        #expect(timer.expired(now: Self.start + .seconds(31)) == .body)
        timer.requestEnded()
        #expect(timer.expired(now: Self.start + .seconds(1_000_000)) == nil)
        timer.responseEnded(now: Self.start)
        #expect(timer.expired(now: Self.start + .seconds(59)) == nil)
        #expect(timer.expired(now: Self.start + .seconds(60)) == .idle)
    }

    @Test("limits read under a prefix; bad values name their key")
    func settings() throws {
        let read = try HTTP1Limits(
            prefix: "KINDRED_X_MEDIA_",
            defaults: HTTP1Limits(maxConnections: 2048),
            environment: EnvironmentReader([
                "KINDRED_X_MEDIA_HEADER_TIMEOUT_MS": "2500", "KINDRED_X_MEDIA_MAX_CONNECTIONS": "10",
            ])
        )
        #expect(read.headerTimeout == .milliseconds(2500) && read.maxConnections == 10)
        #expect(read.bodyTimeout == .seconds(30) && read.idleTimeout == .seconds(60))
        for (key, value) in [
            ("KINDRED_X_MEDIA_HEADER_TIMEOUT_MS", "0"), ("KINDRED_X_MEDIA_IDLE_TIMEOUT_MS", "forever"),
            ("KINDRED_X_MEDIA_MAX_CONNECTIONS", "0"), ("KINDRED_X_MEDIA_BODY_TIMEOUT_MS", "-5"),
        ] {
            let error = try #require(throws: ConfigurationError.self) {
                try HTTP1Limits(
                    prefix: "KINDRED_X_MEDIA_",
                    defaults: .admin,
                    environment: EnvironmentReader([key: value])
                )
            }
            #expect(error.key == key)
        }
        let endpoint = try ServerEndpointSettings(
            prefix: "KINDRED_X_",
            defaultPort: 50080,
            environment: EnvironmentReader(["KINDRED_X_ADMIN_MAX_CONNECTIONS": "8"])
        )
        #expect(endpoint.adminConfiguration?.limits.maxConnections == 8)
        #expect(ServerEndpointSettings(defaultPort: 50080).adminConfiguration?.limits == .admin)
    }

    /// The deadlines run on the server's event loop, so a test process whose tasks are starved for a while (a
    /// parallel run of every suite on two cores) only looks later; the bounds of the looks are generous.
    static func admin(_ limits: HTTP1Limits) -> AdminServer {
        AdminServer(
            configuration: AdminServer.Configuration(host: "127.0.0.1", port: 0, limits: limits),
            logger: Logger(label: "test.http1"),
            metrics: { "" },
            healthy: { true }
        )
    }

    @Test("past the cap a connection is closed at accept without a byte, while the open ones are served")
    func connectionCap() async throws {
        var limits = HTTP1Limits(maxConnections: 4)
        limits.headerTimeout = .seconds(120)
        limits.idleTimeout = .seconds(120)
        let admin = Self.admin(limits)
        let port = try await admin.start().port!
        var open: [RawConnection] = []
        for _ in 0..<3 {
            let silent = try await RawConnection.open(port: port)
            open.append(silent)
        }
        let normal = try await RawConnection.open(port: port)
        try await normal.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try await normal.received(containing: "SERVING", within: .seconds(30)))
        #expect(admin.portMetrics.openConnections == 4)

        let refused = try await RawConnection.open(port: port)
        #expect(await refused.closed(within: .seconds(30)))
        #expect(refused.text.isEmpty && admin.portMetrics.refusedConnections == 1)
        #expect(!normal.text.isEmpty && open.allSatisfy { $0.channel.isActive })
        for connection in open + [normal] { connection.channel.close(promise: nil) }
        await admin.stop()
    }

    /// The interop Echo and Health/Check are immediate handlers: over HTTP/1.1 (Connect unary) they answer in the
    /// read that brought the request, through the same `ServerCall` as over HTTP/2.
    @Test("an immediate handler answers a Connect call over HTTP/1.1, and the connection serves the next one")
    func immediateHandlerOverHTTP1() async throws {
        var configuration = GRPCServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.web = WebProtocols(
            http1: HTTP1Port.layer(limits: Self.limits, metrics: HTTP1PortMetrics(port: "web", factory: NOOPMetricsHandler.instance)))
        let server = GRPCServer(configuration: configuration, services: [InteropService()], logger: Logger(label: "test.http1"))
        let port = try await server.start().port!
        let connection = try await RawConnection.open(port: port)
        // EchoRequest{message: "h1-echo"}: field 1, length 7.
        let body = "\u{0A}\u{07}h1-echo"
        for answers in 1...2 {
            try await connection.send(
                "POST /kindred.testing.v1.InteropService/Echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/proto\r\n"
                    + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
            let deadline = ContinuousClock.now + .seconds(30)
            while connection.text.components(separatedBy: "h1-echo").count <= answers && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        #expect(connection.text.components(separatedBy: "HTTP/1.1 200").count == 3, "\(connection.text)")
        #expect(connection.text.components(separatedBy: "h1-echo").count == 3)
        connection.channel.close(promise: nil)
        await server.shutdown(grace: .seconds(1))
    }

    @Test("slow and silent connections are closed at their timeout; a normal request is served, then idles out")
    func slowConnections() async throws {
        var limits = HTTP1Limits(maxConnections: 16)
        limits.headerTimeout = .seconds(1)
        limits.bodyTimeout = .seconds(1)
        limits.idleTimeout = .seconds(2)
        let admin = Self.admin(limits)
        let port = try await admin.start().port!

        // A partial header, a header trickled a byte at a time, and a body that stops short.
        let partial = try await RawConnection.open(port: port, sending: "GET /healthz HTTP/1.1\r\nHo")
        let trickled = try await RawConnection.open(port: port)
        let body = try await RawConnection.open(
            port: port, sending: "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
        // A normal request on a kept-alive connection: served while three slow ones are open.
        let normal = try await RawConnection.open(port: port, sending: "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try await normal.received(containing: "SERVING", within: .seconds(30)))

        // Its header deadline runs from the accept: if the test is starved it may pass before the trickle ends,
        // and a send then finds the connection closed, which is the behaviour under test.
        for byte in "GET /healthz HTTP/1.1\r\nHost:".utf8.prefix(4) {
            do {
                try await trickled.send(String(UnicodeScalar(byte)))
            } catch {
                break
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        for connection in [partial, trickled, body] {
            #expect(await connection.closed(within: .seconds(30)))
        }
        #expect(admin.portMetrics.timeouts("header") == 2 && admin.portMetrics.timeouts("body") == 1)
        // The kept-alive connection is closed once idle for its timeout.
        #expect(await normal.closed(within: .seconds(30)))
        #expect(admin.portMetrics.timeouts("idle") == 1)

        // The slow ones are gone: a new connection is served.
        let again = try await RawConnection.open(
            port: port, sending: "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(try await again.received(containing: "SERVING", within: .seconds(30)))
        #expect(await again.closed(within: .seconds(30)))
        for _ in 0..<500 where admin.portMetrics.openConnections > 0 { try await Task.sleep(for: .milliseconds(20)) }
        #expect(admin.portMetrics.openConnections == 0)
        await admin.stop()
    }
}

/// A plain TCP connection that records what the server sends and notices when it closes.
private struct RawConnection: Sendable {
    let channel: any Channel
    let box: NIOLockedValueBox<String>

    /// Connects and, when `first` is given, writes it on the event loop as the connection becomes active: the
    /// bytes leave at once even when the test's own tasks are starved, so no deadline passes before them.
    static func open(port: Int, sending first: String? = nil) async throws -> RawConnection {
        let box = NIOLockedValueBox("")
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Collector(box: box, first: first))
                }
            }
            .connect(host: "127.0.0.1", port: port)
            .get()
        return RawConnection(channel: channel, box: box)
    }

    var text: String { self.box.withLockedValue { $0 } }

    func send(_ text: String) async throws {
        try await self.channel.writeAndFlush(ByteBuffer(string: text))
    }

    func received(containing needle: String, within limit: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if self.text.contains(needle) { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return self.text.contains(needle)
    }

    /// Whether the server closed the connection within `limit`.
    func closed(within limit: Duration) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if !self.channel.isActive { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        // A starved task may wake past its deadline: look once more before giving up.
        if !self.channel.isActive { return true }
        self.channel.close(promise: nil)
        return false
    }
}

private final class Collector: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let box: NIOLockedValueBox<String>
    let first: String?

    init(box: NIOLockedValueBox<String>, first: String?) {
        self.box = box
        self.first = first
    }

    func channelActive(context: ChannelHandlerContext) {
        if let first = self.first {
            context.writeAndFlush(NIOAny(ByteBuffer(string: first)), promise: nil)
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = self.unwrapInboundIn(data)
        self.box.withLockedValue { $0 += String(buffer: buffer) }
    }
}
