/// A delivery the webhook sender claimed: what to post where, signed with which secrets.
struct DueWebhookDelivery: Sendable {
    let deliveryID: String
    let endpointID: String
    let url: String
    let body: String
    /// The current secret first, then the previous one while it still signs.
    let secrets: [WebhookSecret]
    /// Attempts made before this one.
    let attempts: Int
    /// Milliseconds since the delivery was queued (or replayed): retries stop a day after.
    let elapsedMs: Int64
}
