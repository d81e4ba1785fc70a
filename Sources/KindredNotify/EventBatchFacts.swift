/// What the events of one `DeliverEvents` batch are checked against, read once for the batch right after its locks
/// (``EventBatchLocks``), in its transaction (``NotifyService/applyEvents(_:from:)``): two statements a batch, not two
/// an event. Which of the members the events name have a tombstone (``DeletedMemberStore``; read after their
/// locks are held, so a deletion applied at once either committed before, and is seen, or waits for the batch), with
/// the members the batch's own deletions add as they are applied; and the enabled webhook endpoints, by the event
/// types each takes (``WebhookStore``).
struct EventBatchFacts: Sendable, Hashable {
    /// Members named by the batch's events who have a tombstone.
    var deleted: Set<String> = []
    /// Enabled webhook endpoints' ids, by event type.
    var endpoints: [String: [String]] = [:]
}
