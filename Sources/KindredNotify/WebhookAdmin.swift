import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import Logging

/// `kindred.notify.v1.WebhookService`: the admin's webhook endpoints, their secrets and deliveries. Every RPC
/// needs the admin role (the kit's ``ServiceAccess``); SQL goes through ``WebhookStore``.
final class WebhookAdmin: GRPCService, Sendable {
    typealias W = Kindred.Notify.V1
    let settings: WebhookSettings
    let database: PostgresClient
    let access: ServiceAccess
    let store = WebhookStore()
    /// Signs `ListWebhookDeliveries` page tokens.
    let pageKey: [UInt8]

    static let maxEventTypes = 20
    static let maxDescription = 200
    static let updatePaths: Set<String> = ["url", "event_types", "enabled", "description"]

    init(settings: WebhookSettings, database: PostgresClient, access: ServiceAccess, serviceSecret: String?) {
        self.settings = settings
        self.database = database
        self.access = access
        self.pageKey = PageToken.key(service: "notify-webhooks", secret: serviceSecret)
    }

    func register(in router: inout GRPCRouter) {
        typealias M = W.WebhookService.Method
        router.unary(M.createWebhookEndpoint) { try await self.create($0, $1) }
        router.unary(M.listWebhookEndpoints) { try await self.list($0, $1) }
        router.unary(M.updateWebhookEndpoint) { try await self.update($0, $1) }
        router.unary(M.deleteWebhookEndpoint) { try await self.delete($0, $1) }
        router.unary(M.rotateWebhookSecret) { try await self.rotate($0, $1) }
        router.unary(M.listWebhookDeliveries) { try await self.deliveries($0, $1) }
        router.unary(M.replayWebhookDelivery) { try await self.replay($0, $1) }
    }

    func create(_ request: W.CreateWebhookEndpointRequest, _ context: ServerContext) async throws
        -> W.CreateWebhookEndpointResponse
    {
        try await self.access.requireAdmin(context)
        let url = try self.url(request.url)
        let types = try Self.eventTypes(request.eventTypes)
        let description = try Self.description(request.description)
        let key = try self.secretKey()
        let secret = try WebhookSecret.generate()
        let id = try UUIDv7.generate()
        let endpoint = try await self.store.create(
            id: id,
            url: url.text,
            eventTypes: types,
            description: description,
            sealedSecret: try key.seal(secret, endpoint: id),
            in: self.database
        )
        var response = W.CreateWebhookEndpointResponse()
        response.endpoint = endpoint.message
        response.secret = secret.text
        return response
    }

    func list(_ request: W.ListWebhookEndpointsRequest, _ context: ServerContext) async throws
        -> W.ListWebhookEndpointsResponse
    {
        try await self.access.requireAdmin(context)
        var response = W.ListWebhookEndpointsResponse()
        response.endpoints = try await self.store.list(in: self.database).map(\.message)
        return response
    }

    func update(_ request: W.UpdateWebhookEndpointRequest, _ context: ServerContext) async throws
        -> W.UpdateWebhookEndpointResponse
    {
        try await self.access.requireAdmin(context)
        let id = try Self.id(request.endpointId, field: "endpoint_id")
        let paths = Set(request.updatePaths)
        guard !paths.isEmpty, paths.isSubset(of: Self.updatePaths) else {
            throw NotifyError.invalid("update_paths", "MALFORMED", "1..4 of url, event_types, enabled, description")
        }
        let url = paths.contains("url") ? try self.url(request.url).text : nil
        let types = paths.contains("event_types") ? try Self.eventTypes(request.eventTypes) : nil
        let description = paths.contains("description") ? try Self.description(request.description) : nil
        guard
            let endpoint = try await self.store.update(
                id,
                url: url,
                eventTypes: types,
                enabled: paths.contains("enabled") ? request.enabled : nil,
                description: description,
                in: self.database
            )
        else { throw Self.endpointNotFound }
        var response = W.UpdateWebhookEndpointResponse()
        response.endpoint = endpoint.message
        return response
    }

    func delete(_ request: W.DeleteWebhookEndpointRequest, _ context: ServerContext) async throws
        -> W.DeleteWebhookEndpointResponse
    {
        try await self.access.requireAdmin(context)
        let id = try Self.id(request.endpointId, field: "endpoint_id")
        var response = W.DeleteWebhookEndpointResponse()
        response.removed = try await self.store.delete(id, in: self.database)
        return response
    }

    func rotate(_ request: W.RotateWebhookSecretRequest, _ context: ServerContext) async throws
        -> W.RotateWebhookSecretResponse
    {
        try await self.access.requireAdmin(context)
        let id = try Self.id(request.endpointId, field: "endpoint_id")
        let key = try self.secretKey()
        let secret = try WebhookSecret.generate()
        guard
            let endpoint = try await self.store.rotate(
                id,
                to: try key.seal(secret, endpoint: id),
                grace: self.settings.secretGrace,
                in: self.database
            )
        else { throw Self.endpointNotFound }
        var response = W.RotateWebhookSecretResponse()
        response.endpoint = endpoint.message
        response.secret = secret.text
        return response
    }

    func deliveries(_ request: W.ListWebhookDeliveriesRequest, _ context: ServerContext) async throws
        -> W.ListWebhookDeliveriesResponse
    {
        try await self.access.requireAdmin(context)
        let id = try Self.id(request.endpointId, field: "endpoint_id")
        guard (0...100).contains(request.pageSize) else {
            throw NotifyError.invalid("page_size", "OUT_OF_RANGE", "0..100")
        }
        let state: String? =
            switch request.state {
            case .unspecified: nil
            case .pending: "pending"
            case .delivered: "delivered"
            case .failed: "failed"
            case .unrecognized: throw NotifyError.invalid("state", "MALFORMED", "a delivery state")
            }
        let scope = "\(id)|\(state ?? "")"
        let offset = try PageToken.offset(of: request.pageToken, key: self.pageKey, scope: scope)
        guard try await self.store.exists(id, in: self.database) else { throw Self.endpointNotFound }
        let size = request.pageSize == 0 ? 20 : Int(request.pageSize)
        let page = try await self.store.deliveries(
            of: id,
            state: state,
            offset: offset,
            limit: size + 1,
            in: self.database
        )
        var response = W.ListWebhookDeliveriesResponse()
        response.deliveries = page.prefix(size).map(\.message)
        if page.count > size {
            response.nextPageToken = PageToken.encode(offset: offset + size, key: self.pageKey, scope: scope)
        }
        return response
    }

    func replay(_ request: W.ReplayWebhookDeliveryRequest, _ context: ServerContext) async throws
        -> W.ReplayWebhookDeliveryResponse
    {
        try await self.access.requireAdmin(context)
        let id = try Self.id(request.deliveryId, field: "delivery_id")
        guard let delivery = try await self.store.replay(id, in: self.database) else {
            throw NotifyError.notFound("webhook delivery", reason: "WEBHOOK_DELIVERY_NOT_FOUND")
        }
        var response = W.ReplayWebhookDeliveryResponse()
        response.delivery = delivery.message
        return response
    }

    /// The key that seals signing secrets; without one no secret is made (FAILED_PRECONDITION).
    private func secretKey() throws -> WebhookSecretKey {
        guard let key = self.settings.secretKey else {
            throw ServiceError(
                .failedPrecondition, "WEBHOOK_KEY_NOT_CONFIGURED",
                "Webhook secrets are sealed with \(WebhookSecretsAtRest.setting), which this deployment does not set")
        }
        return key
    }

    // MARK: Input

    private func url(_ text: String) throws -> WebhookURL {
        do {
            return try WebhookURL(
                text, httpHosts: self.settings.httpHosts, allowPrivateHosts: self.settings.allowPrivateHosts)
        } catch {
            throw NotifyError.invalid("url", error.reason, error.hint)
        }
    }

    /// 1..20 known event types, sorted, without repeats.
    static func eventTypes(_ types: [String]) throws -> [String] {
        let unique = Set(types)
        guard (1...Self.maxEventTypes).contains(unique.count), unique.isSubset(of: WebhookEvent.types) else {
            throw NotifyError.invalid(
                "event_types",
                "MALFORMED",
                "1..20 of " + WebhookEvent.types.sorted().joined(separator: ", ")
            )
        }
        return unique.sorted()
    }

    static func description(_ text: String) throws -> String {
        guard text.count <= Self.maxDescription, text.utf8.count <= 4 * Self.maxDescription,
            !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw NotifyError.invalid("description", "MALFORMED", "0..200 characters, no control characters")
        }
        return text
    }

    static func id(_ text: String, field: String) throws -> String {
        guard UUIDv7.isValid(text) else { throw NotifyError.invalid(field, "MALFORMED", "an id") }
        return text.lowercased()
    }

    static var endpointNotFound: NotifyError {
        NotifyError.notFound("webhook endpoint", reason: "WEBHOOK_ENDPOINT_NOT_FOUND")
    }
}
