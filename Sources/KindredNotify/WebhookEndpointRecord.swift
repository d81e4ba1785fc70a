import KindredProto

/// A row of `webhook_endpoints` as handlers and the CLI see it (never the secrets).
struct WebhookEndpointRecord: Sendable, Equatable {
    let endpointID: String
    let url: String
    let eventTypes: [String]
    let description: String
    let enabled: Bool
    let disabledReason: String
    let createdUnixMs: Int64
    /// 0 = no previous secret signing any more.
    let previousSecretExpiresUnixMs: Int64

    var message: Kindred.Notify.V1.WebhookEndpoint {
        var endpoint = Kindred.Notify.V1.WebhookEndpoint()
        endpoint.endpointId = self.endpointID
        endpoint.url = self.url
        endpoint.eventTypes = self.eventTypes
        endpoint.enabled = self.enabled
        endpoint.disabledReason = self.disabledReason
        endpoint.description = self.description
        endpoint.createdUnixMs = self.createdUnixMs
        endpoint.previousSecretExpiresUnixMs = self.previousSecretExpiresUnixMs
        return endpoint
    }
}
