import KindredOpenSSL
import NIOCore
import NIOPosix

/// What a test server's connection reported.
enum PeerEvent: Sendable {
    case handshake(TLSHandshakeCompleted)
    case error(String)
    case closed
}

/// Echoes every byte back, flushing at the end of each read batch.
final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.write(data, promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
    }
}

/// Sits above the TLS handler on the server and reports its events.
final class ServerRecorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let events: AsyncStream<PeerEvent>.Continuation

    init(_ events: AsyncStream<PeerEvent>.Continuation) {
        self.events = events
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let completed = event as? TLSHandshakeCompleted {
            self.events.yield(.handshake(completed))
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        self.events.yield(.error("\(error)"))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.events.yield(.closed)
        context.fireChannelInactive()
    }
}

struct TestServer {
    let channel: Channel
    let events: AsyncStream<PeerEvent>

    var port: Int { self.channel.localAddress!.port! }

    /// - Parameters:
    ///   - remoteHalfClosure: sets `ChannelOptions.allowRemoteHalfClosure` on accepted channels.
    ///   - application: the handler above the TLS handler (default: echo).
    init(
        _ configuration: TLSConfiguration,
        remoteHalfClosure: Bool = false,
        application: @escaping @Sendable () -> any ChannelHandler = { EchoHandler() }
    ) async throws {
        let context = try TLSContext(configuration: configuration)
        let (events, continuation) = AsyncStream<PeerEvent>.makeStream()
        self.events = events
        self.channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: remoteHalfClosure)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(TLSHandler(context: context))
                    try pipeline.addHandler(ServerRecorder(continuation))
                    try pipeline.addHandler(application())
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }

    /// The first event a connection reported.
    func firstEvent() async -> PeerEvent? {
        var iterator = self.events.makeAsyncIterator()
        return await iterator.next()
    }

    func stop() async throws {
        try await self.channel.close()
    }
}

/// Collects a client's handshake outcome and the bytes it receives.
final class ClientCollector: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let handshake: EventLoopPromise<TLSHandshakeCompleted>
    private let received: EventLoopPromise<ByteBuffer>
    private let expectedBytes: Int
    /// With auto-read off, asks for more after each batch.
    private let readsManually: Bool
    private var buffer = ByteBuffer()

    init(
        handshake: EventLoopPromise<TLSHandshakeCompleted>,
        received: EventLoopPromise<ByteBuffer>,
        expectedBytes: Int,
        readsManually: Bool
    ) {
        self.handshake = handshake
        self.received = received
        self.expectedBytes = expectedBytes
        self.readsManually = readsManually
    }

    func channelActive(context: ChannelHandlerContext) {
        if self.readsManually { context.read() }
        context.fireChannelActive()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.readsManually { context.read() }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let completed = event as? TLSHandshakeCompleted {
            self.handshake.succeed(completed)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = self.unwrapInboundIn(data)
        self.buffer.writeBuffer(&bytes)
        if self.buffer.readableBytes >= self.expectedBytes {
            self.received.succeed(self.buffer)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        self.handshake.fail(error)
        self.received.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.handshake.fail(ChannelError.ioOnClosedChannel)
        self.received.fail(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }
}

struct TestClient {
    let channel: Channel
    let handshake: EventLoopFuture<TLSHandshakeCompleted>
    let received: EventLoopFuture<ByteBuffer>

    init(
        port: Int,
        configuration: TLSConfiguration,
        serverName: String? = "localhost",
        expectedBytes: Int = 0,
        autoRead: Bool = true,
        remoteHalfClosure: Bool = false
    ) async throws {
        let context = try TLSContext(configuration: configuration)
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let handshake = eventLoop.makePromise(of: TLSHandshakeCompleted.self)
        let received = eventLoop.makePromise(of: ByteBuffer.self)
        self.handshake = handshake.futureResult
        self.received = received.futureResult
        // A connection that fails (a connect timeout on a starved machine) never reaches the collector: its
        // promises are failed here, or NIO's leak check would end the whole test process.
        do {
            self.channel = try await Self.connect(
                eventLoop: eventLoop, port: port, context: context, serverName: serverName,
                handshake: handshake, received: received, expectedBytes: expectedBytes, autoRead: autoRead,
                remoteHalfClosure: remoteHalfClosure)
        } catch {
            handshake.fail(error)
            received.fail(error)
            throw error
        }
    }

    private static func connect(
        eventLoop: any EventLoop,
        port: Int,
        context: TLSContext,
        serverName: String?,
        handshake: EventLoopPromise<TLSHandshakeCompleted>,
        received: EventLoopPromise<ByteBuffer>,
        expectedBytes: Int,
        autoRead: Bool,
        remoteHalfClosure: Bool
    ) async throws -> Channel {
        try await ClientBootstrap(group: eventLoop)
            .channelOption(.autoRead, value: autoRead)
            .channelOption(.allowRemoteHalfClosure, value: remoteHalfClosure)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(TLSHandler(context: context, serverName: serverName))
                    try pipeline.addHandler(
                        ClientCollector(
                            handshake: handshake,
                            received: received,
                            expectedBytes: expectedBytes,
                            readsManually: !autoRead
                        )
                    )
                }
            }
            .connect(host: "127.0.0.1", port: port)
            .get()
    }

    /// Writes each chunk, then flushes once.
    func send(_ chunks: [[UInt8]]) async throws {
        let channel = self.channel
        let futures = chunks.map { channel.write(channel.allocator.buffer(bytes: $0)) }
        channel.flush()
        for future in futures { try await future.get() }
    }
}

/// Counts what it receives until the peer half-closes (close_notify), then answers with the count
/// and closes.
final class CountThenReplyHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var count = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.count += self.unwrapInboundIn(data).readableBytes
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let event = event as? ChannelEvent, event == .inputClosed else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        let reply = context.channel.allocator.buffer(string: "received \(self.count) bytes")
        context.writeAndFlush(self.wrapOutboundOut(reply), promise: nil)
        context.close(promise: nil)
    }
}
