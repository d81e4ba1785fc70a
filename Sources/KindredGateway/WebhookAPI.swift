import KindredGRPC
import KindredProto
import KindredProtobuf

/// The webhook RPCs of `kindred.api.v1.AdminService`, served by notify's `kindred.notify.v1.WebhookService`.
/// The public messages of `api/v1/webhooks.proto` are notify's field for field (same numbers and types;
/// `WebhookAPITests` holds them to it), so requests and answers pass through as their bytes.
extension Gateway {
    func registerWebhookRoutes(in router: inout GRPCRouter) {
        typealias M = Api.AdminService.Method
        typealias W = NotifyApi.WebhookService.Method
        router.unary(M.createWebhookEndpoint) { try await self.relayWebhookCall(W.createWebhookEndpoint, $0, $1) }
        router.unary(M.listWebhookEndpoints) { try await self.relayWebhookCall(W.listWebhookEndpoints, $0, $1) }
        router.unary(M.updateWebhookEndpoint) { try await self.relayWebhookCall(W.updateWebhookEndpoint, $0, $1) }
        router.unary(M.deleteWebhookEndpoint) { try await self.relayWebhookCall(W.deleteWebhookEndpoint, $0, $1) }
        router.unary(M.rotateWebhookSecret) { try await self.relayWebhookCall(W.rotateWebhookSecret, $0, $1) }
        router.unary(M.listWebhookDeliveries) { try await self.relayWebhookCall(W.listWebhookDeliveries, $0, $1) }
        router.unary(M.replayWebhookDelivery) { try await self.relayWebhookCall(W.replayWebhookDelivery, $0, $1) }
    }

    /// An admin's call, forwarded to notify with the caller's token (notify checks the role again).
    private func relayWebhookCall<
        PublicRequest: ProtoMessage,
        Request: ProtoMessage,
        Response: ProtoMessage,
        PublicResponse: ProtoMessage
    >(
        _ method: ProtoMethod<Request, Response>,
        _ request: PublicRequest,
        _ context: ServerContext
    ) async throws -> PublicResponse {
        let caller = try await self.admit(context, .admin)
        let response = try await self.requireNotify().call(
            method,
            try Self.rewrap(request, as: Request.self),
            as: caller
        )
        return try Self.rewrap(response, as: PublicResponse.self)
    }

    /// `message` read as the wire-identical type `Other`.
    static func rewrap<Other: ProtoMessage>(_ message: some ProtoMessage, as _: Other.Type) throws -> Other {
        try Other(serializedBytes: try message.serializedBytes())
    }
}
