import NIOCore
import NIOHTTP1

/// Refuses an HTTP/1.0 request that carries Transfer-Encoding: RFC 9112 §6.1 has a server treat its framing as
/// faulty (chunked framing does not exist in HTTP/1.0, and a proxy in front may have framed it otherwise, the
/// shape of request smuggling). NIO's decoder accepts it, so this answers 400 and closes the connection before the
/// request reaches the port's handler, as the decoder does for the shapes it refuses itself. Found by FuzzHTTP1.
final class HTTP10FramingGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private var refused = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if self.refused { return }  // the rest of the refused request, or anything after it
        if case .head(let head) = Self.unwrapInboundIn(data), head.version == .http1_0,
            head.headers.contains(name: "transfer-encoding")
        {
            self.refused = true
            let headers = HTTPHeaders([("Connection", "close"), ("Content-Length", "0")])
            let answer = HTTPResponseHead(version: .http1_1, status: .badRequest, headers: headers)
            context.write(Self.wrapOutboundOut(.head(answer)), promise: nil)
            context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: nil)
            context.close(promise: nil)
            return
        }
        context.fireChannelRead(data)
    }
}
