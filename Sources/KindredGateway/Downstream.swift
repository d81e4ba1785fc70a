import KindredGRPC
import KindredProtobuf
import Logging

/// One service behind the gateway: its client, the default deadline of calls to it, and the error mapping.
/// Every call carries the caller's identity (their access token), the client's address and the request id
/// (added by the runtime), and ends no later than the client's own deadline.
struct Downstream: Sendable {
    let name: String
    let client: GRPCClient
    let timeout: Duration
    let metrics: GatewayMetrics
    let logger: Logger

    func call<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ request: Request,
        as caller: Caller
    ) async throws(RPCError) -> Response {
        try await self.call(method, request, metadata: caller.forwardedMetadata)
    }

    /// A call with metadata of the gateway's choosing (its own service token, where a service names the user).
    func call<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ request: Request,
        metadata: Metadata
    ) async throws(RPCError) -> Response {
        do {
            let response = try await self.client.unary(
                method,
                request,
                metadata: metadata,
                options: CallOptions(timeout: self.timeout, idempotent: Self.isIdempotent(method.name))
            )
            self.metrics.downstreamFinished(service: self.name, code: .ok)
            return response
        } catch {
            self.metrics.downstreamFinished(service: self.name, code: (error as? RPCError)?.code ?? .unavailable)
            throw GatewayErrors.fromDownstream(error, service: self.name, logger: self.logger)
        }
    }

    /// Writes that are idempotent by a key the request carries (DESIGN.md: a swipe's pair key, a message's client
    /// message id; read marks only move forward).
    static let idempotentWrites: Set<String> = ["Swipe", "SendMessage", "MarkRead", "MarkDelivered"]

    /// Whether a call may run twice without harm: reads (by their verb) and `idempotentWrites`. A service with
    /// several replicas then has such a call retried on another even when its connection broke mid-call.
    static func isIdempotent(_ method: String) -> Bool {
        for verb in ["Get", "List", "Check", "Lookup", "Search", "History", "FilterUnseen"] where method.hasPrefix(verb) {
            return true
        }
        return Self.idempotentWrites.contains(method)
    }
}
