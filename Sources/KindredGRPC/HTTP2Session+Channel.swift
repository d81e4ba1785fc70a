import KindredHTTP2
import NIOCore

extension HTTP2Session {
    /// Writes the frames nghttp2 has ready to the channel and flushes them. Shared by the server and client
    /// connection handlers; throws when the session has failed (the caller closes the connection).
    ///
    /// With a `limit`, frames are taken from nghttp2 only while the channel is writable, at most `limit`
    /// bytes per write: what the peer does not read stays inside nghttp2, bounded by flow control and its
    /// ACK limit, instead of piling up in NIO. The caller flushes again when the channel becomes writable.
    func flush(to context: ChannelHandlerContext, limit: Int = .max) throws(HTTP2SessionError) {
        if limit != .max && !context.channel.isWritable { return }
        repeat {
            var buffer = context.channel.allocator.buffer(capacity: 0)
            try self.write(into: &buffer, limit: limit)
            guard buffer.readableBytes > 0 else { return }
            let drained = buffer.readableBytes < limit
            context.writeAndFlush(NIOAny(buffer), promise: nil)
            if drained { return }
        } while context.channel.isWritable
    }
}
