/// A delivery the webhook sender claimed: what to post where, signed with which secrets.
struct DueWebhookDelivery: Sendable {
    let deliveryID: String
    let endpointID: String
    let url: String
    let body: String
    /// The current secret first, then the previous one while it still signs, as stored: sealed
    /// (``WebhookSecretKey``) when `sealed`, else in the clear (a row an older version wrote, before notify sealed it).
    let storedSecrets: [[UInt8]]
    let sealed: Bool
    /// Attempts made before this one.
    let attempts: Int
    /// Milliseconds since the delivery was queued (or replayed): retries stop a day after.
    let elapsedMs: Int64
}
