import KindredPostgres
import KindredProto
import KindredServiceKit

extension NotifyService {
    /// Queues `event` for every enabled webhook endpoint whose filter holds its type (`endpoints`, by type: the
    /// batch's ``EventBatchFacts``), in the transaction that records the event id (so an event delivered again
    /// queues nothing more, and none is lost).
    func fanOutToWebhooks(
        _ event: Kindred.Common.V1.Event, endpoints: [String: [String]], in transaction: PostgresTransaction
    ) async throws {
        // No endpoint at all (the usual case): the event's body is not even built.
        guard !endpoints.isEmpty, let webhook = WebhookEvent(event), let endpoints = endpoints[webhook.type] else {
            return
        }
        try await WebhookStore().fanOut(webhook, to: endpoints, newID: { try UUIDv7.generate() }, in: transaction)
    }

    /// Account deletion: every webhook delivery naming the member goes (the `account.deleted` notice itself names
    /// none: it is purged with the others after the retention period).
    func eraseWebhookDeliveries(of user: String, in transaction: PostgresTransaction) async throws {
        try await WebhookStore().erase(user, in: transaction)
    }

    /// Deliveries naming `user`, for `GetUserFootprint`.
    func webhookDeliveryCount(naming user: String) async throws -> Int64 {
        try await WebhookStore().count(naming: user, in: self.database)
    }
}
