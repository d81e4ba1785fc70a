import KindredHTTP2
import NIOCore

extension HTTP2Session {
    /// Writes every frame nghttp2 has ready to the channel in one buffer and flushes it. Shared by the server
    /// and client connection handlers; throws when the session has failed (the caller closes the connection).
    func flush(to context: ChannelHandlerContext) throws(HTTP2SessionError) {
        var buffer = context.channel.allocator.buffer(capacity: 0)
        try self.write(into: &buffer)
        if buffer.readableBytes > 0 {
            context.writeAndFlush(NIOAny(buffer), promise: nil)
        }
    }
}
