import NIOCore

/// The first handler of a client connection whose configuration has an `addressCheck`: once the socket is
/// connected, the address it reached (what the client's own name resolution chose, so a name that resolves to
/// another address at connect time than when it was checked is caught) is put to the check. A refused address
/// closes the connection before a byte is written: no TLS handshake, no request.
final class AddressCheckHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let check: @Sendable (SocketAddress) -> Bool
    /// The address refused, if any (read by the pool to say why the connection failed).
    private(set) var refused: SocketAddress?

    init(check: @escaping @Sendable (SocketAddress) -> Bool) {
        self.check = check
    }

    func channelActive(context: ChannelHandlerContext) {
        guard let address = context.channel.remoteAddress, self.check(address) else {
            self.refused = context.channel.remoteAddress
            context.close(promise: nil)
            return
        }
        context.fireChannelActive()
    }
}
