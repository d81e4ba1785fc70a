import Logging
import NIOCore
import NIOPosix
import Testing

@testable import KindredGRPC

/// What a client connection leaves behind when it ends.
@Suite struct ClientConnectionLifetimeTests {
    final class Watched: @unchecked Sendable {
        weak var handler: ClientConnectionHandler?
    }

    /// A connect that is refused never makes the channel active: NIO removes its handlers without a
    /// `channelInactive`. The handler must still let go of its context and its nghttp2 session, or the three keep
    /// each other alive; a client retrying a dead server makes tens of such connections a second, and the
    /// gateway grew by about a mebibyte each time chat was killed.
    @Test("a connection whose connect was refused leaves no handler or HTTP/2 session behind")
    func aRefusedConnectionIsFreed() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let closed = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(closed.localAddress?.port)
        try await closed.close()

        let watched = Watched()
        let bootstrap = ClientBootstrap(group: group).channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                let handler = ClientConnectionHandler(
                    configuration: GRPCClientConfiguration(host: "127.0.0.1", port: port),
                    logger: Logger(label: "test.client-connection")
                )
                watched.handler = handler
                try channel.pipeline.syncOperations.addHandler(handler)
            }
        }
        await #expect(throws: (any Error).self) { try await bootstrap.connect(host: "127.0.0.1", port: port).get() }
        // The handlers are removed on the channel's loop after the failed connect.
        var waited = 0
        while try await group.any().submit({ watched.handler != nil }).get(), waited < 200 {
            try await Task.sleep(for: .milliseconds(10))
            waited += 1
        }
        #expect(watched.handler == nil, "the handler outlived its channel")
    }
}
