import CoreMetrics
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// The admin port every Kindred server opens next to its gRPC port: plain HTTP/1.1 for operators and
/// scrapers, never for clients.
///
/// - `GET /metrics`: Prometheus text (`text/plain; version=0.0.4`) from `metrics()`.
/// - `GET /healthz`: 200 `SERVING` or 503 `NOT_SERVING` from `healthy()`.
///
/// Anything else is 404; methods other than GET/HEAD are 405; request bodies are refused (413) — the admin
/// port has nothing to upload. Slow or silent connections are closed and open ones capped (`HTTP1Limits`).
public final class AdminServer: Sendable {
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        /// Timeouts and the connection cap; default `HTTP1Limits.admin` (64 connections).
        public var limits: HTTP1Limits
        public init(host: String, port: Int, limits: HTTP1Limits = .admin) {
            self.host = host
            self.port = port
            self.limits = limits
        }
    }

    private let configuration: Configuration
    private let metrics: @Sendable () -> String
    private let healthy: @Sendable () -> Bool
    private let group: any EventLoopGroup
    private let logger: Logger
    /// The port's own counters (`http_*{port="admin"}`).
    public let portMetrics: HTTP1PortMetrics
    private let channel = NIOLockedValueBox<(any Channel)?>(nil)

    public init(
        configuration: Configuration,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger,
        metricsFactory: any MetricsFactory = NOOPMetricsHandler.instance,
        metrics: @escaping @Sendable () -> String,
        healthy: @escaping @Sendable () -> Bool
    ) {
        self.configuration = configuration
        self.group = group
        self.logger = logger
        self.portMetrics = HTTP1PortMetrics(port: "admin", factory: metricsFactory)
        self.metrics = metrics
        self.healthy = healthy
    }

    /// Binds the port; returns the bound address.
    @discardableResult
    public func start() async throws -> SocketAddress {
        let metrics = self.metrics
        let healthy = self.healthy
        let channel = try await HTTP1Port.bind(
            host: self.configuration.host,
            port: self.configuration.port,
            limits: self.configuration.limits,
            metrics: self.portMetrics,
            group: self.group
        ) { AdminHTTPHandler(metrics: metrics, healthy: healthy) }
        self.channel.withLockedValue { $0 = channel }
        let address = channel.localAddress!
        self.logger.info("admin port listening", metadata: ["address": "\(address)", "paths": "/metrics /healthz"])
        return address
    }

    public func stop() async {
        let channel = self.channel.withLockedValue { value -> (any Channel)? in
            defer { value = nil }
            return value
        }
        try? await channel?.close()
    }
}

/// Answers one request at a time on the connection (HTTP/1.1 keep-alive; no pipelining needed by scrapers).
private final class AdminHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let metrics: @Sendable () -> String
    private let healthy: @Sendable () -> Bool
    private var head: HTTPRequestHead?
    private var bodyTooLarge = false

    init(metrics: @escaping @Sendable () -> String, healthy: @escaping @Sendable () -> Bool) {
        self.metrics = metrics
        self.healthy = healthy
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            self.bodyTooLarge = false
        case .body:
            self.bodyTooLarge = true
        case .end:
            guard let head = self.head else { return }
            self.head = nil
            self.respond(context: context, head: head)
        }
    }

    private func respond(context: ChannelHandlerContext, head: HTTPRequestHead) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        let (status, contentType, body): (HTTPResponseStatus, String, String)
        if self.bodyTooLarge {
            (status, contentType, body) = (.payloadTooLarge, "text/plain", "no request bodies here\n")
        } else if head.method != .GET && head.method != .HEAD {
            (status, contentType, body) = (.methodNotAllowed, "text/plain", "GET only\n")
        } else if path == "/metrics" {
            (status, contentType, body) = (.ok, "text/plain; version=0.0.4; charset=utf-8", self.metrics())
        } else if path == "/healthz" {
            let serving = self.healthy()
            (status, contentType, body) = (serving ? .ok : .serviceUnavailable, "text/plain", serving ? "SERVING\n" : "NOT_SERVING\n")
        } else {
            (status, contentType, body) = (.notFound, "text/plain", "not found: try /metrics or /healthz\n")
        }
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: contentType)
        headers.add(name: "content-length", value: "\(body.utf8.count)")
        headers.add(name: "cache-control", value: "no-store")
        let keepAlive = head.isKeepAlive && status != .payloadTooLarge
        if !keepAlive { headers.add(name: "connection", value: "close") }
        context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        if head.method != .HEAD {
            context.write(self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil)
        }
        let done = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: done)
        if !keepAlive {
            let channel = context.channel
            done.futureResult.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
