/// One endpoint's signing secrets as `webhook_endpoints` holds them: sealed with ``WebhookSecretKey``, or in the
/// clear in a row an older version wrote (notify seals those when it starts).
struct StoredWebhookSecrets: Sendable {
    let endpointID: String
    let secret: [UInt8]
    let previousSecret: [UInt8]?
    let sealed: Bool
}
