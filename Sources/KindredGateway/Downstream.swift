import KindredGRPC
import KindredProtobuf
import KindredServiceKit
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
    /// Discovery as geographic shards: a caller's call goes to the shard owning their cell (`client` is shard 0,
    /// which answers the calls that name no viewer).
    var shards: DiscoveryShardRouter? = nil

    func call<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ request: Request,
        as caller: Caller
    ) async throws(RPCError) -> Response {
        try await self.call(method, request, metadata: caller.forwardedMetadata, viewer: caller.userID)
    }

    /// A call with metadata of the gateway's choosing (its own service token, where a service names the user).
    func call<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ request: Request,
        metadata: Metadata,
        viewer: String? = nil
    ) async throws(RPCError) -> Response {
        do {
            let options = CallOptions(timeout: self.timeout, idempotent: Self.isIdempotent(method.name))
            let response =
                if let shards = self.shards, let viewer {
                    try await shards.unary(method, request, viewer: viewer, metadata: metadata, options: options)
                } else {
                    try await self.client.unary(method, request, metadata: metadata, options: options)
                }
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
