import CoreMetrics
import KindredHTTP2
import KindredOpenSSL
import KindredProtobuf
import KindredTracing
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Configuration of a client for one target.
public struct GRPCClientConfiguration: Sendable {
    public var host: String
    public var port: Int
    /// TLS (ALPN h2) when set; h2c with prior knowledge otherwise.
    public var tls: TLSContext?
    /// The name the server's certificate must carry (SNI and verification); `host` by default.
    public var tlsServerName: String?
    /// The :authority header; "host:port" by default.
    public var authority: String
    /// HTTP/2 connections opened to the target as calls arrive; calls are spread over them. Default 2.
    public var connectionCount: Int = 2
    /// Connections opened at most (at least `connectionCount`): more open, one at a time, only while every
    /// stream the server allows on each connection (its SETTINGS_MAX_CONCURRENT_STREAMS) is in use. Default 8.
    public var maxConnectionCount: Int = 8
    /// Calls that may wait for a free stream once `maxConnectionCount` connections are full; a call waits until
    /// its deadline at most, then fails with RESOURCE_EXHAUSTED, as does every call past this many. Default 1000.
    public var maxWaitingCalls: Int = 1000
    public var http2 = HTTP2Configuration()
    /// Largest response message accepted, in bytes. Default 4 MiB.
    public var maxReceiveMessageSize: Int = 4 << 20
    /// Deadline for calls that set none and inherit none. Default 30 s: every call has a deadline.
    public var defaultTimeout: Duration = .seconds(30)
    /// TCP connect timeout. Default 5 s.
    public var connectTimeout: Duration = .seconds(5)
    /// Reconnect backoff (gRPC connection-backoff: 1 s initial, ×1.6, ±20% jitter, at most 120 s).
    public var backoff = Backoff()
    /// Request bytes queued per stream above which a writer waits. Default 256 KiB.
    public var outboundHighWatermark: Int = 256 << 10
    /// The target's replicas when it has several (`host` and `port` are then the first's): each gets its own
    /// connections and calls are balanced over the healthy ones (see `ReplicaBalancer`). Empty: `host:port`
    /// alone, which is also balanced when `host` is a DNS name resolving to several addresses.
    public var replicas: [GRPCEndpoint] = []
    /// How often each replica of a target with several is asked grpc.health.v1 Check. Default 2 s.
    public var healthCheckInterval: Duration = .seconds(2)
    /// How often a DNS name that resolved to several replicas is resolved again. Default 30 s.
    public var resolveInterval: Duration = .seconds(30)
    /// Where the per-replica metrics of a target with several replicas go; `MetricsSystem.factory` when nil.
    public var metricsFactory: (any MetricsFactory)?
    /// Checks the address each new connection reached before anything is written on it (`AddressCheckHandler`);
    /// false closes it, as a connection that failed. Nil (the default): every address. Notify's webhook client
    /// refuses loopback, private and link-local addresses with it, on the address actually connected to.
    public var addressCheck: (@Sendable (SocketAddress) -> Bool)?

    public struct Backoff: Sendable {
        public var initial: Duration = .seconds(1)
        public var multiplier: Double = 1.6
        public var jitter: Double = 0.2
        public var maximum: Duration = .seconds(120)
        public init() {}

        /// The delay before reconnect attempt `attempt` (0-based).
        public func delay(attempt: Int) -> Duration {
            let base = Double(self.initial.components.seconds) + Double(self.initial.components.attoseconds) / 1e18
            let maximum = Double(self.maximum.components.seconds)
            var raw = base
            for _ in 0..<min(attempt, 64) { raw = min(raw * self.multiplier, maximum) }
            return .milliseconds(Int64(raw * Double.random(in: (1 - self.jitter)...(1 + self.jitter)) * 1000))
        }
    }

    public init(host: String, port: Int, tls: TLSContext? = nil) {
        self.host = host
        self.port = port
        self.tls = tls
        self.authority = "\(host):\(port)"
    }

    /// A target with several replicas (at least one); the first gives `host`, `port` and the :authority.
    public init(replicas: [GRPCEndpoint], tls: TLSContext? = nil) {
        precondition(!replicas.isEmpty, "a target needs at least one address")
        self.init(host: replicas[0].host, port: replicas[0].port, tls: tls)
        self.replicas = replicas.count > 1 ? replicas : []
    }
}

/// One replica's address.
public struct GRPCEndpoint: Hashable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public var description: String { self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)" }
}

/// Per-call options.
public struct CallOptions: Sendable {
    /// The call's timeout; the effective deadline is the earlier of this and the propagated one.
    public var timeout: Duration?
    /// The call may run twice without harm (a read, or a write carrying its idempotency key): on a target with
    /// several replicas it is also retried on another when its connection broke mid-call. Every unary call is
    /// retried when it failed before the server could have acted on it: on another replica (see `ReplicaBalancer`),
    /// or on a target with one address once, on another connection.
    public var idempotent: Bool
    public init(timeout: Duration? = nil, idempotent: Bool = false) {
        self.timeout = timeout
        self.idempotent = idempotent
    }
}

/// A response with its metadata.
public struct ClientResponse<Message: ProtoMessage>: Sendable {
    public var message: Message
    public var metadata: Metadata
    public var trailers: Metadata
}

/// A gRPC client for one target: a small pool of HTTP/2 connections that honours the server's stream limit
/// (see `ConnectionPool`), reconnecting with backoff. A target with several replicas (a list of addresses, or a
/// DNS name with several) has a pool per replica, and its calls are balanced and retried by `ReplicaBalancer`.
public final class GRPCClient: Sendable {
    public let configuration: GRPCClientConfiguration
    private let route: Route

    /// One target calls its pool directly, as before replicas existed: the same per-call cost.
    private enum Route: Sendable {
        case single(ConnectionPool)
        case replicas(ReplicaBalancer)
    }

    public init(
        configuration: GRPCClientConfiguration,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger
    ) {
        self.configuration = configuration
        if let balancer = ReplicaBalancer.make(configuration: configuration, group: group, logger: logger) {
            self.route = .replicas(balancer)
        } else {
            self.route = .single(ConnectionPool(configuration: configuration, group: group, logger: logger))
        }
    }

    /// Closes every connection once its calls are done.
    public func close() async {
        switch self.route {
        case .single(let pool): await pool.close()
        case .replicas(let balancer): await balancer.close()
        }
    }

    /// The replicas calls are balanced over, with whether each takes calls now (health); one entry for a
    /// target with a single address.
    public var replicaStates: [(endpoint: GRPCEndpoint, up: Bool)] {
        switch self.route {
        case .single: [(GRPCEndpoint(host: self.configuration.host, port: self.configuration.port), true)]
        case .replicas(let balancer): balancer.states
        }
    }

    // MARK: Calls

    public func unary<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ request: Request,
        metadata: Metadata = [:],
        options: CallOptions = .init()
    ) async throws -> Response {
        try await self.unaryWithMetadata(method, request, metadata: metadata, options: options).message
    }

    public func unaryWithMetadata<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ request: Request,
        metadata: Metadata = [:],
        options: CallOptions = .init()
    ) async throws -> ClientResponse<Response> {
        let deadline = GRPCDeadline.effective(timeout: options.timeout ?? self.configuration.defaultTimeout)
        let framed = try MessageFraming.frame(request, allocator: ByteBufferAllocator()) {
            RPCError(.internalError, "Failed to encode the request")
        }
        var metadata = self.withRequestID(metadata)
        let span = TraceSwitch.isOn ? CallTracing.startClientSpan(path: method.path, metadata: &metadata) : nil
        let outcome: ClientCall.UnaryOutcome
        do {
            switch self.route {
            case .single(let pool):
                var attempt = try await pool.unary(
                    path: method.path, metadata: metadata, deadline: deadline, request: framed)
                if attempt.retry == .unprocessed, !Task.isCancelled, deadline.map({ $0 > .now() }) ?? true {
                    // The server never saw the call (a GOAWAY, say of a connection it closed as idle, crossed it):
                    // once more, on a connection of the pool that is not going away (gRPC's transparent retry).
                    attempt = try await pool.unary(
                        path: method.path, metadata: metadata, deadline: deadline, request: framed)
                }
                outcome = attempt
            case .replicas(let balancer):
                outcome = try await balancer.unary(
                    path: method.path, metadata: metadata, deadline: deadline, request: framed,
                    idempotent: options.idempotent)
            }
        } catch {
            if let span { CallTracing.end(span, code: (error as? RPCError)?.code ?? .unknown) }
            throw error
        }
        if let span { CallTracing.end(span, code: outcome.status.code) }
        guard outcome.status.code == .ok else { throw outcome.status }
        guard let message = outcome.message else { throw RPCError(.internalError, "The server sent no response message") }
        let response: Response
        do {
            response = try message.withUnsafeReadableBytes { try Response(serializedBytes: $0) }
        } catch {
            throw RPCError(.internalError, "The response is not a valid \(Response.protoMessageName) message")
        }
        return ClientResponse(message: response, metadata: outcome.metadata, trailers: outcome.status.metadata)
    }

    public func serverStreaming<Request, Response, Result: Sendable>(
        _ method: ProtoMethod<Request, Response>,
        _ request: Request,
        metadata: Metadata = [:],
        options: CallOptions = .init(),
        _ body: (ClientResponseStream<Response>) async throws -> Result
    ) async throws -> Result {
        try await self.withCall(method.path, metadata: metadata, options: options) { call in
            try call.send(request)
            call.end()
            let result = try await body(ClientResponseStream(call: call))
            try await Self.requireOK(call)
            return result
        }
    }

    public func clientStreaming<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        metadata: Metadata = [:],
        options: CallOptions = .init(),
        _ body: (ClientRequestWriter<Request>) async throws -> Void
    ) async throws -> Response {
        try await self.withCall(method.path, metadata: metadata, options: options) { call in
            try await body(ClientRequestWriter(call: call))
            call.end()
            let message = try await call.nextMessage()
            let status = await call.finalStatus()
            guard status.code == .ok else { throw status }
            guard let message else { throw RPCError(.internalError, "The server sent no response message") }
            return try call.decode(message)
        }
    }

    public func bidirectionalStreaming<Request, Response, Result: Sendable>(
        _ method: ProtoMethod<Request, Response>,
        metadata: Metadata = [:],
        options: CallOptions = .init(),
        _ body: (ClientRequestWriter<Request>, ClientResponseStream<Response>) async throws -> Result
    ) async throws -> Result {
        try await self.withCall(method.path, metadata: metadata, options: options) { call in
            let result = try await body(ClientRequestWriter(call: call), ClientResponseStream(call: call))
            call.end()
            try await Self.requireOK(call)
            return result
        }
    }

    /// The call's metadata with the request id of the handler it is made from (see `GRPCRequestID`).
    private func withRequestID(_ metadata: Metadata) -> Metadata {
        guard let requestID = GRPCRequestID.current, metadata[GRPCRequestID.metadataKey] == nil else { return metadata }
        var metadata = metadata
        metadata.add(GRPCRequestID.metadataKey, requestID)
        return metadata
    }

    private static func requireOK(_ call: ClientCall) async throws {
        // Drain what the body left unread, then check the status.
        while try await call.nextMessage() != nil {}
        let status = await call.finalStatus()
        guard status.code == .ok else { throw status }
    }

    /// Opens a stream, runs `body`, and cancels the stream if the body throws or the task is cancelled.
    private func withCall<Result>(
        _ path: String,
        metadata: Metadata,
        options: CallOptions,
        _ body: (ClientCall) async throws -> Result
    ) async throws -> Result {
        let deadline = GRPCDeadline.effective(timeout: options.timeout ?? self.configuration.defaultTimeout)
        var metadata = self.withRequestID(metadata)
        let span = TraceSwitch.isOn ? CallTracing.startClientSpan(path: path, metadata: &metadata) : nil
        let call: ClientCall
        var replica: ReplicaBalancer.Replica?
        do {
            switch self.route {
            case .single(let pool):
                call = try await pool.startCall(path: path, metadata: metadata, deadline: deadline)
            case .replicas(let balancer):
                (call, replica) = try await balancer.startCall(path: path, metadata: metadata, deadline: deadline)
            }
        } catch {
            if let span { CallTracing.end(span, code: (error as? RPCError)?.code ?? .unknown) }
            throw error
        }
        // A streaming call counts as in flight on its replica until its body is done.
        defer { replica?.callEnded() }
        return try await withTaskCancellationHandler {
            do {
                let result = try await body(call)
                if let span { CallTracing.end(span, code: .ok) }
                return result
            } catch {
                call.cancel()
                if let span { CallTracing.end(span, code: (error as? RPCError)?.code ?? .cancelled) }
                // A status from the server beats the local error the body saw.
                if error is RPCError { throw error }
                if error is CancellationError { throw RPCError(.cancelled, "The call was cancelled") }
                throw error
            }
        } onCancel: {
            call.cancel()
        }
    }
}

extension ClientCall {
    func metadataSnapshot() async -> Metadata {
        if self.eventLoop.inEventLoop { return self.responseMetadata }
        return await withCheckedContinuation { continuation in
            self.eventLoop.execute { continuation.resume(returning: self.responseMetadata) }
        }
    }
}

/// Response messages of a streaming call.
public struct ClientResponseStream<Message: ProtoMessage>: AsyncSequence, Sendable {
    public typealias Element = Message
    let call: ClientCall

    public struct AsyncIterator: AsyncIteratorProtocol {
        let call: ClientCall
        public mutating func next() async throws -> Message? {
            guard let bytes = try await self.call.nextMessage() else { return nil }
            return try self.call.decode(bytes)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(call: self.call) }

    /// The response headers' metadata (empty until they arrived).
    public var metadata: Metadata {
        get async { await self.call.metadataSnapshot() }
    }
}

/// Sends the request messages of a streaming call; `write` waits under backpressure.
public struct ClientRequestWriter<Message: ProtoMessage>: Sendable {
    let call: ClientCall

    public func write(_ message: Message) async throws {
        try self.call.send(message)
        try await self.call.waitUntilWritable()
    }

    /// Ends the request stream early (it also ends when the body returns).
    public func finish() {
        self.call.end()
    }
}
