import NIOCore
import NIOPosix

/// A TCP server that answers SMTP commands from a script, for misbehaviour aiosmtpd cannot show
/// (silence, data pipelined after the STARTTLS reply).
struct ScriptedPeer {
    let channel: any Channel

    var port: Int { self.channel.localAddress!.port! }

    /// - Parameters:
    ///   - greeting: sent on connect; nil sends nothing (a silent server).
    ///   - replies: the reply to each command, chosen by its first word (upper case).
    init(greeting: String?, replies: [String: String] = [:]) async throws {
        self.channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ScriptHandler(greeting: greeting, replies: replies))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }

    func stop() async throws {
        try await self.channel.close()
    }
}

private final class ScriptHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let greeting: String?
    private let replies: [String: String]
    private var buffer = ByteBuffer()

    init(greeting: String?, replies: [String: String]) {
        self.greeting = greeting
        self.replies = replies
    }

    func channelActive(context: ChannelHandlerContext) {
        if let greeting = self.greeting {
            context.writeAndFlush(self.wrapOutboundOut(ByteBuffer(string: greeting)), promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = self.unwrapInboundIn(data)
        self.buffer.writeBuffer(&bytes)
        while let newline = self.buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) {
            let length = newline - self.buffer.readerIndex + 1
            let line = self.buffer.readString(length: length) ?? ""
            // "\r\n" is one Character, a whitespace one.
            let verb = line.split(whereSeparator: \.isWhitespace).first.map { $0.uppercased() }
            let reply = verb.flatMap { self.replies[$0] } ?? "500 5.5.1 unknown\r\n"
            context.writeAndFlush(self.wrapOutboundOut(ByteBuffer(string: reply)), promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }
}
