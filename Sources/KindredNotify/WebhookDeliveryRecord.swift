import KindredProto

/// A row of `webhook_deliveries` as `ListWebhookDeliveries` shows it (not its body).
struct WebhookDeliveryRecord: Sendable, Equatable {
    let deliveryID: String
    let endpointID: String
    let eventType: String
    let state: String
    let attempts: Int
    let lastStatus: Int
    let lastError: String
    let createdUnixMs: Int64
    let nextAttemptUnixMs: Int64
    let deliveredUnixMs: Int64

    var message: Kindred.Notify.V1.WebhookDelivery {
        var delivery = Kindred.Notify.V1.WebhookDelivery()
        delivery.deliveryId = self.deliveryID
        delivery.endpointId = self.endpointID
        delivery.eventType = self.eventType
        delivery.state = Self.states[self.state] ?? .unspecified
        delivery.attempts = Int32(clamping: self.attempts)
        delivery.lastStatus = Int32(clamping: self.lastStatus)
        delivery.lastError = self.lastError
        delivery.createdUnixMs = self.createdUnixMs
        delivery.nextAttemptUnixMs = self.state == "pending" ? self.nextAttemptUnixMs : 0
        delivery.deliveredUnixMs = self.deliveredUnixMs
        return delivery
    }

    static let states: [String: Kindred.Notify.V1.WebhookDeliveryState] = [
        "pending": .pending, "delivered": .delivered, "failed": .failed,
    ]
}
