import KindredHTTP2
import Logging
import NIOCore
import NIOPosix

/// The connection settings of an `HTTP2Client` are those of a gRPC client: target, TLS (ALPN h2), connection
/// count and limits, timeouts, reconnect backoff. `maxReceiveMessageSize` bounds a response body.
public typealias HTTP2ClientConfiguration = GRPCClientConfiguration

/// A plain HTTP/2 client for one origin (HTTPS with ALPN h2, or h2c): requests with custom headers and a body,
/// for HTTP APIs such as Apple's push provider API and Firebase Cloud Messaging.
///
/// It runs on the same connections as `GRPCClient` (`ConnectionPool` and `ClientConnectionHandler`): requests
/// are multiplexed as concurrent streams up to the server's SETTINGS_MAX_CONCURRENT_STREAMS on each of
/// `connectionCount` connections (more open while all are full, up to `maxConnectionCount`), broken connections
/// are replaced with backoff, and every request has a deadline.
public final class HTTP2Client: Sendable {
    public let configuration: HTTP2ClientConfiguration
    private let pool: ConnectionPool

    public init(
        configuration: HTTP2ClientConfiguration,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger
    ) {
        self.configuration = configuration
        self.pool = ConnectionPool(configuration: configuration, group: group, logger: logger)
    }

    /// Sends `request` and returns the response, whatever its status.
    /// - Throws: `RPCError` when no response arrived: UNAVAILABLE (cannot connect, connection lost, stream
    ///   refused), DEADLINE_EXCEEDED (`timeout`, or the configuration's default, passed), RESOURCE_EXHAUSTED (no
    ///   free stream before the deadline, or a body over `maxReceiveMessageSize`), CANCELLED.
    public func send(_ request: HTTP2Request, timeout: Duration? = nil) async throws -> HTTP2Response {
        let deadline = GRPCDeadline.effective(timeout: timeout ?? self.configuration.defaultTimeout)
        let exchange = try await self.pool.startExchange(request, deadline: deadline)
        return try await withTaskCancellationHandler {
            try await exchange.response()
        } onCancel: {
            exchange.cancel()
        }
    }

    /// Closes every connection once its requests are done.
    public func close() async {
        await self.pool.close()
    }
}
