import KindredGRPC
import KindredProto
import KindredProtobuf
import KindredServiceKit

/// Calls that service tests make the same way in every service: a unary call with a bearer token, the status
/// of a call that must fail, and DeliverEvents as a producer would send it.
extension GRPCClient {
    /// A unary call with `token` as the bearer.
    public func call<Request, Response>(_ method: ProtoMethod<Request, Response>, _ request: Request, token: String)
        async throws -> Response
    {
        try await self.unary(method, request, metadata: ["authorization": .string("Bearer " + token)])
    }

    /// The status code of a call that must fail: nil when it succeeded, `.unknown` for an error that is not a
    /// gRPC status.
    public func failureCode<Request, Response>(
        _ method: ProtoMethod<Request, Response>, _ request: Request, token: String
    ) async -> StatusCode? {
        do {
            _ = try await self.call(method, request, token: token)
            return nil
        } catch let error as RPCError {
            return error.code
        } catch {
            return .unknown
        }
    }

    /// Delivers `events` to a service's `DeliverEvents` as `producer` would: the producer's name on each event, an
    /// event id where none is set, the producer's service token. Returns the acknowledged ids.
    public func deliver(
        _ method: ProtoMethod<Kindred.Common.V1.DeliverEventsRequest, Kindred.Common.V1.DeliverEventsResponse>,
        _ events: [Kindred.Common.V1.Event],
        from producer: String,
        tokens: TestTokens
    ) async throws -> [String] {
        var request = Kindred.Common.V1.DeliverEventsRequest()
        request.events = try events.map {
            var event = $0
            event.producer = producer
            if event.eventId.isEmpty { event.eventId = try UUIDv7.generate() }
            return event
        }
        return try await self.call(method, request, token: tokens.serviceToken(producer)).acknowledgedEventIds
    }
}
