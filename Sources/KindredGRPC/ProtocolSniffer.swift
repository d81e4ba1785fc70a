import NIOCore

/// First on a connection of a server that also serves HTTP/1.1 (`WebProtocols.http1`): reads until the first bytes
/// tell the HTTP/2 client preface (RFC 9113 §3.4) from an HTTP/1.1 request line, installs that protocol's handlers
/// after itself, hands them the bytes read so far and leaves the pipeline. A connection that sends neither within
/// the handshake timeout is closed.
final class ProtocolSniffer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    enum Choice: Equatable {
        case http2
        case http1
    }

    private let timeout: Duration?
    private let metrics: ServerMetrics
    private let install: (Choice, ChannelPipeline.SynchronousOperations) throws -> Void
    private var buffered: ByteBuffer?
    private var timer: Scheduled<Void>?

    init(
        timeout: Duration?,
        metrics: ServerMetrics,
        install: @escaping (Choice, ChannelPipeline.SynchronousOperations) throws -> Void
    ) {
        self.timeout = timeout
        self.metrics = metrics
        self.install = install
    }

    /// The protocol the first bytes show, nil while they are a strict prefix of the HTTP/2 preface.
    static func choose(_ bytes: some Collection<UInt8>) -> Choice? {
        let count = min(bytes.count, Self.preface.count)
        guard bytes.prefix(count).elementsEqual(Self.preface.prefix(count)) else { return .http1 }
        return count == Self.preface.count ? .http2 : nil
    }

    func handlerAdded(context: ChannelHandlerContext) {
        guard let timeout = self.timeout else { return }
        self.timer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(timeout)) { [self] in
            self.metrics.timedOut(.handshake)
            context.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = self.unwrapInboundIn(data)
        if var buffered = self.buffered {
            buffered.writeBuffer(&bytes)
            bytes = buffered
        }
        guard let choice = Self.choose(bytes.readableBytesView) else {
            self.buffered = bytes
            return
        }
        self.buffered = nil
        self.timer?.cancel()
        self.timer = nil
        do {
            try self.install(choice, context.pipeline.syncOperations)
        } catch {
            context.close(promise: nil)
            return
        }
        context.fireChannelRead(NIOAny(bytes))
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
