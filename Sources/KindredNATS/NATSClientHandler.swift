import Foundation
import Logging
import NIOCore

/// One connection's protocol: waits for the server's INFO, sends CONNECT and a PING, reports the connection ready
/// at the PONG; afterwards answers PINGs, hands messages to `received` and closes the connection on bytes it
/// cannot accept or on the server's `-ERR`.
final class NATSClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var parser = NATSParser()
    private let connectJSON: String
    private let ready: EventLoopPromise<NATSServerInfo>
    private let received: @Sendable (NATSMessage) -> Void
    private let logger: Logger
    private var info: NATSServerInfo?
    private var isReady = false

    init(
        connectJSON: String,
        ready: EventLoopPromise<NATSServerInfo>,
        logger: Logger,
        received: @escaping @Sendable (NATSMessage) -> Void
    ) {
        self.connectJSON = connectJSON
        self.ready = ready
        self.logger = logger
        self.received = received
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.parser.append(self.unwrapInboundIn(data))
        do throws(NATSProtocolError) {
            while let operation = try self.parser.next() {
                self.handle(operation, context: context)
            }
            self.parser.compact()
        } catch {
            self.logger.warning("NATS server sent bytes the client refuses", metadata: ["error": "\(error)"])
            self.fail(error, context: context)
        }
    }

    private func handle(_ operation: NATSServerOperation, context: ChannelHandlerContext) {
        switch operation {
        case .info(let json):
            guard let info = try? JSONDecoder().decode(NATSServerInfo.self, from: Data(json)) else {
                self.fail(NATSProtocolError(.malformed, "INFO is not the expected JSON"), context: context)
                return
            }
            if let maxPayload = info.maxPayload, maxPayload > 0 {
                self.parser.maxPayload = min(maxPayload + 64 * 1024, NATSParser.defaultMaxPayload)
            }
            let first = self.info == nil
            self.info = info
            if first {
                self.write("CONNECT \(self.connectJSON)\r\nPING\r\n", context: context)
            }
        case .ping:
            self.write("PONG\r\n", context: context)
        case .pong:
            if !self.isReady, let info = self.info {
                self.isReady = true
                self.ready.succeed(info)
            }
        case .ok:
            break
        case .error(let text):
            self.logger.warning("NATS server error", metadata: ["nats.error": "\(text)"])
            // Every -ERR but a permission violation closes the connection on the server's side too.
            if !text.lowercased().hasPrefix("permissions violation") {
                self.fail(NATSProtocolError(.server, text), context: context)
            }
        case .message(let message):
            self.received(message)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.failHandshake(NATSProtocolError(.connectionLost, "the connection closed during the handshake"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.failHandshake(error)
        context.close(promise: nil)
    }

    private func fail(_ error: NATSProtocolError, context: ChannelHandlerContext) {
        self.failHandshake(error)
        context.close(promise: nil)
    }

    /// Fails the handshake's promise unless it is already settled.
    private func failHandshake(_ error: any Error) {
        guard !self.isReady else { return }
        self.isReady = true
        self.ready.fail(error)
    }

    private func write(_ text: String, context: ChannelHandlerContext) {
        context.writeAndFlush(self.wrapOutboundOut(context.channel.allocator.buffer(string: text)), promise: nil)
    }
}

/// The fields of the server's INFO that the client uses.
struct NATSServerInfo: Decodable, Sendable {
    var serverID: String?
    var maxPayload: Int?
    var headers: Bool?
    var jetstream: Bool?
    var connectURLs: [String]?

    enum CodingKeys: String, CodingKey {
        case serverID = "server_id"
        case maxPayload = "max_payload"
        case headers, jetstream
        case connectURLs = "connect_urls"
    }
}
