import KindredOpenSSL
import NIOCore
import NIOPosix

/// What a test server's connection reported.
enum PeerEvent: Sendable {
    case handshake(TLSHandshakeCompleted)
    case error(String)
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
}

struct TestServer {
    let channel: Channel
    let events: AsyncStream<PeerEvent>

    var port: Int { self.channel.localAddress!.port! }

    init(_ configuration: TLSConfiguration) async throws {
        let context = try TLSContext(configuration: configuration)
        let (events, continuation) = AsyncStream<PeerEvent>.makeStream()
        self.events = events
        self.channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(TLSHandler(context: context))
                    try pipeline.addHandler(ServerRecorder(continuation))
                    try pipeline.addHandler(EchoHandler())
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
    private var buffer = ByteBuffer()

    init(handshake: EventLoopPromise<TLSHandshakeCompleted>, received: EventLoopPromise<ByteBuffer>, expectedBytes: Int) {
        self.handshake = handshake
        self.received = received
        self.expectedBytes = expectedBytes
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
        expectedBytes: Int = 0
    ) async throws {
        let context = try TLSContext(configuration: configuration)
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let handshake = eventLoop.makePromise(of: TLSHandshakeCompleted.self)
        let received = eventLoop.makePromise(of: ByteBuffer.self)
        self.handshake = handshake.futureResult
        self.received = received.futureResult
        self.channel = try await ClientBootstrap(group: eventLoop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(TLSHandler(context: context, serverName: serverName))
                    try pipeline.addHandler(
                        ClientCollector(handshake: handshake, received: received, expectedBytes: expectedBytes)
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
