import KindredGRPC
import KindredPostgres
import KindredProto
import Logging

extension EventInbox {
    /// Like ``process(_:from:handler:)``, but the whole batch in ONE transaction (one commit, not one per event),
    /// each event inside a savepoint: an event whose handler throws is rolled back alone and holds its partition
    /// (the rest of that partition waits for redelivery), duplicates are acknowledged without effect, unknown
    /// payloads acknowledged, exactly as `process` does.
    ///
    /// `state` is what the handler builds up for the caller to act on after the commit (memory changes, say);
    /// an event's changes to it are dropped with its savepoint. When the transaction is retried (a conflict, a
    /// lost connection before COMMIT) the batch runs again from `state`. A failure of the transaction itself
    /// (BEGIN, COMMIT) throws: nothing is acknowledged and nothing applied.
    ///
    /// `prepare` runs first in the transaction, outside every savepoint: what it takes (advisory locks the batch's
    /// events will need, in one order for every batch, so that two batches applied at once never wait on each other
    /// in a cycle) is held until the commit.
    public func processInOneTransaction<State: Sendable>(
        _ events: [Kindred.Common.V1.Event],
        from producer: String,
        state initial: State,
        prepare: (PostgresTransaction) async throws -> Void = { _ in },
        handler: (Kindred.Common.V1.Event, PostgresTransaction, inout State) async throws -> Void
    ) async throws -> (acknowledged: [String], state: State) {
        guard events.count <= DeliveryPlan.maxBatch else {
            throw RPCError(.invalidArgument, "At most \(DeliveryPlan.maxBatch) events per call")
        }
        guard events.allSatisfy({ $0.producer == producer }) else {
            throw RPCError(.invalidArgument, "Events must come from their producer")
        }
        return try await self.database.withTransaction { transaction in
            try await prepare(transaction)
            var decisions = InboxBatch()
            var state = initial
            for event in events {
                guard decisions.shouldProcess(event) else { continue }
                guard event.payload != nil else {
                    decisions.acknowledge(event)  // a payload type this build does not know
                    continue
                }
                guard UUIDv7.isValid(event.eventId) else {
                    self.logger.error("event with an invalid id", metadata: ["events.producer": "\(event.producer)"])
                    decisions.fail(event)
                    continue
                }
                try await transaction.execute("SAVEPOINT inbox_event")
                var eventState = state
                do {
                    let recorded = try await transaction.execute(
                        """
                        INSERT INTO events_inbox (event_id, producer, partition_key, sequence)
                        VALUES (\(event.eventId)::uuid, \(event.producer), \(event.partitionKey), \(event.sequence))
                        ON CONFLICT (event_id) DO NOTHING
                        """
                    )
                    if recorded == 1 {
                        try await EventTracing.handling(event) { try await handler(event, transaction, &eventState) }
                    }
                    try await transaction.execute("RELEASE SAVEPOINT inbox_event")
                    state = eventState
                    decisions.acknowledge(event)
                } catch let error as PostgresError where error.code == .connectionLost {
                    throw error  // the transaction is gone: retried whole, or the call fails
                } catch {
                    self.logger.warning(
                        "event not applied, will be redelivered",
                        metadata: [
                            "events.producer": "\(event.producer)", "events.id": "\(event.eventId)",
                            "error.type": "\(type(of: error))",
                        ]
                    )
                    try await transaction.execute("ROLLBACK TO SAVEPOINT inbox_event")
                    decisions.fail(event)
                }
            }
            return (decisions.acknowledged, state)
        }
    }
}
