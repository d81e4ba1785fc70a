import KindredProtobuf
import NIOCore

/// A service registers its methods' handlers with the router.
public protocol GRPCService: Sendable {
    func register(in router: inout GRPCRouter)
}

/// Maps request paths (`/package.Service/Method`) to handlers.
public struct GRPCRouter: Sendable {
    var handlers: [String: MethodHandler] = [:]

    public init() {}

    /// Registered paths, sorted.
    public var paths: [String] { self.handlers.keys.sorted() }

    /// Fully qualified names of the registered services, sorted.
    public var serviceNames: [String] {
        Set(self.handlers.keys.compactMap { path in path.split(separator: "/").first.map(String.init) }).sorted()
    }

    public mutating func register(_ service: any GRPCService) {
        service.register(in: &self)
    }

    public mutating func unary<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ handler: @escaping @Sendable (Request, ServerContext) async throws -> Response
    ) {
        self.handlers[method.path] = MethodHandler(singleRequest: true, singleResponse: true) { call, firstMessage in
            let request: Request = try call.decode(firstMessage!)
            let response = try await handler(request, ServerContext(call: call))
            try call.sendMessage(response)
        }
    }

    /// A unary method whose handler can often answer without waiting: it runs on the connection's event loop as
    /// soon as the request has arrived, with no task, and returns `.now(response)`, or `.later { … }` with the
    /// part that must wait (I/O, a sleep, a downstream call), which then runs as an `async` handler does. The
    /// synchronous part must not block and cannot be cancelled; deadline, cancellation and error mapping apply as
    /// for `unary` (a deadline or reset before the answer ends the call the same way). Where `.now` is the common
    /// answer this saves the task and its hops, the largest single cost of a small call.
    public mutating func immediateUnary<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ handler: @escaping @Sendable (Request, ServerContext) throws -> ImmediateResponse<Response>
    ) {
        let runNow: @Sendable (ServerCall, ByteBuffer) throws -> (@Sendable () async throws -> Void)? = {
            call, firstMessage in
            let request: Request = try call.decode(firstMessage)
            switch try handler(request, ServerContext(call: call)) {
            case .now(let response):
                try call.sendMessage(response)
                return nil
            case .later(let rest):
                return { try call.sendMessage(try await rest()) }
            }
        }
        // Run as a task when the connection's output was at its cap (see `ServerCall.start`): the same handler.
        self.handlers[method.path] = MethodHandler(singleRequest: true, singleResponse: true, runNow: runNow) {
            call, firstMessage in
            try await runNow(call, firstMessage!)?()
        }
    }

    public mutating func serverStreaming<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ handler: @escaping @Sendable (Request, ResponseWriter<Response>, ServerContext) async throws -> Void
    ) {
        self.handlers[method.path] = MethodHandler(singleRequest: true, singleResponse: false) { call, firstMessage in
            let request: Request = try call.decode(firstMessage!)
            try await handler(request, ResponseWriter(call: call), ServerContext(call: call))
        }
    }

    public mutating func clientStreaming<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ handler: @escaping @Sendable (RequestStream<Request>, ServerContext) async throws -> Response
    ) {
        self.handlers[method.path] = MethodHandler(singleRequest: false, singleResponse: true) { call, _ in
            let response = try await handler(RequestStream(call: call), ServerContext(call: call))
            try call.sendMessage(response)
        }
    }

    public mutating func bidirectionalStreaming<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ handler: @escaping @Sendable (RequestStream<Request>, ResponseWriter<Response>, ServerContext) async throws
            -> Void
    ) {
        self.handlers[method.path] = MethodHandler(singleRequest: false, singleResponse: false) { call, _ in
            try await handler(RequestStream(call: call), ResponseWriter(call: call), ServerContext(call: call))
        }
    }
}

/// A type-erased handler. Single-request methods (unary, server streaming) start once the whole request has
/// arrived and get it as `firstMessage`; streaming-request methods start at the headers.
struct MethodHandler: Sendable {
    let singleRequest: Bool
    /// Unary and client streaming: one response message (what Connect's unary form may call).
    let singleResponse: Bool
    let run: @Sendable (ServerCall, ByteBuffer?) async throws -> Void
    /// Immediate unary handlers (`GRPCRouter.immediateUnary`): runs on the loop with the request and returns nil
    /// when the response is sent, or the rest of the handler to run as a task.
    let runNow: (@Sendable (ServerCall, ByteBuffer) throws -> (@Sendable () async throws -> Void)?)?

    init(
        singleRequest: Bool,
        singleResponse: Bool,
        runNow: (@Sendable (ServerCall, ByteBuffer) throws -> (@Sendable () async throws -> Void)?)? = nil,
        run: @escaping @Sendable (ServerCall, ByteBuffer?) async throws -> Void
    ) {
        self.singleRequest = singleRequest
        self.singleResponse = singleResponse
        self.run = run
        self.runNow = runNow
    }
}

/// What an immediate unary handler (`GRPCRouter.immediateUnary`) answers.
public enum ImmediateResponse<Response: Sendable>: Sendable {
    /// The response, sent at once.
    case now(Response)
    /// The rest of the handler, which waits for something: it runs as a task, like an `async` handler.
    case later(@Sendable () async throws -> Response)
}

/// What a handler knows about its call, and how it sets response metadata.
public struct ServerContext: Sendable {
    let call: ServerCall

    /// The request path, `/package.Service/Method`.
    public var path: String { self.call.path }
    /// Custom request metadata (reserved protocol headers removed).
    public var metadata: Metadata { self.call.requestMetadata }
    /// When the caller stops waiting; nil without `grpc-timeout`.
    public var deadline: NIODeadline? { self.call.deadline }
    /// The time left until the deadline.
    public var remainingTime: Duration? { GRPCDeadline.remaining(until: self.call.deadline) }
    /// The peer's address, e.g. "127.0.0.1:53422".
    public var peer: String { self.call.peer }
    /// The peer's host without the port, e.g. "127.0.0.1" or "::1" (the per-address rate-limit key).
    public var peerHost: String {
        let peer = self.call.peer
        guard let colon = peer.lastIndex(of: ":") else { return peer }
        return String(peer[..<colon])
    }
    /// The request id of this call (the caller's `x-request-id`, or a new one); outgoing calls made by the handler
    /// carry it on.
    public var requestID: String { GRPCRequestID.current ?? self.call.requestID }
    /// Whether the call was cancelled (deadline passed, client reset, server shutdown).
    public var isCancelled: Bool { Task.isCancelled }
    /// The runtime counters of the server serving the call (active calls, open connections), for services that
    /// report them (the interop service's GetServerStats).
    public var serverMetrics: ServerMetrics { self.call.metrics }

    /// Sets the response headers' custom metadata. Only effective before the first response message.
    public func setResponseMetadata(_ metadata: Metadata) {
        self.call.setResponseMetadata(metadata)
    }

    /// Sets the trailers' custom metadata, sent with the final status.
    public func setTrailingMetadata(_ metadata: Metadata) {
        self.call.setTrailingMetadata(metadata)
    }
}

/// The request messages of a client-streaming or bidirectional call. Reading is what opens the HTTP/2
/// flow-control window again: a handler that stops reading makes the client stop sending.
public struct RequestStream<Message: ProtoMessage>: AsyncSequence, Sendable {
    public typealias Element = Message
    let call: ServerCall

    public struct AsyncIterator: AsyncIteratorProtocol {
        let call: ServerCall
        public mutating func next() async throws -> Message? {
            guard let bytes = try await self.call.nextMessage() else { return nil }
            return try self.call.decode(bytes)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(call: self.call) }
}

/// Sends response messages of a streaming call. `write` waits while too many bytes are queued for the
/// client (backpressure from HTTP/2 flow control).
public struct ResponseWriter<Message: ProtoMessage>: Sendable {
    let call: ServerCall

    public func write(_ message: Message) async throws {
        // Waits first, so that a message is not even framed while its stream or connection is over its
        // watermark (see `GRPCServerConfiguration.connectionOutboundHighWatermark`).
        try await self.call.waitUntilWritable()
        try self.call.sendMessage(message)
    }
}
