import KindredGRPC
import KindredPostgres
import KindredProto
import Logging

extension EventInbox {
    /// Like ``process(_:from:handler:)``, but the whole batch in ONE transaction (one commit, not one per event):
    /// an event whose handler throws is rolled back alone and holds its partition (the rest of that partition
    /// waits for redelivery), duplicates are acknowledged without effect, unknown payloads acknowledged, exactly as
    /// `process` does.
    ///
    /// A batch is first applied whole: one statement records every event id, then the handlers run, with no
    /// savepoints (three statements fewer per event). Only when a handler throws is that attempt rolled back and
    /// the batch applied again with each event inside a savepoint, so that the failing one is rolled back alone.
    ///
    /// `state` is what the handler builds up for the caller to act on after the commit (memory changes, say);
    /// an event's changes to it are dropped with its savepoint. When the transaction is retried (a conflict, a
    /// lost connection before COMMIT) the batch runs again from `state`. A failure of the transaction itself
    /// (BEGIN, COMMIT) throws: nothing is acknowledged and nothing applied.
    ///
    /// `prepare` runs first in the transaction, outside every savepoint: what it takes (advisory locks the batch's
    /// events will need, in one order for every batch, so that two batches applied at once never wait on each other
    /// in a cycle) is held until the commit, and what it reads once for the whole batch it may put in `state`.
    public func processInOneTransaction<State: Sendable>(
        _ events: [Kindred.Common.V1.Event],
        from producer: String,
        state initial: State,
        prepare: (PostgresTransaction, inout State) async throws -> Void = { _, _ in },
        handler: (Kindred.Common.V1.Event, PostgresTransaction, inout State) async throws -> Void
    ) async throws -> (acknowledged: [String], state: State) {
        guard events.count <= DeliveryPlan.maxBatch else {
            throw RPCError(.invalidArgument, "At most \(DeliveryPlan.maxBatch) events per call")
        }
        guard events.allSatisfy({ $0.producer == producer }) else {
            throw RPCError(.invalidArgument, "Events must come from their producer")
        }
        do {
            return try await self.database.withTransaction { transaction in
                var prepared = initial
                try await prepare(transaction, &prepared)
                return try await self.applyWhole(events, state: prepared, in: transaction, handler: handler)
            }
        } catch is HandlerFailedInWholeBatch {
            // Rolled back: again, an event at a time, so that only the failing one is held.
        }
        return try await self.database.withTransaction { transaction in
            var state = initial
            try await prepare(transaction, &state)
            var decisions = InboxBatch()
            for event in events {
                guard self.screen(event, into: &decisions) else { continue }
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

    /// The batch without savepoints: records every id it will apply in one statement, then runs the handlers of
    /// the events recorded now (not before). A handler that throws ends the attempt (``HandlerFailedInWholeBatch``,
    /// the transaction rolled back); a lost connection is rethrown as it is, for the transaction to retry.
    private func applyWhole<State: Sendable>(
        _ events: [Kindred.Common.V1.Event],
        state initial: State,
        in transaction: PostgresTransaction,
        handler: (Kindred.Common.V1.Event, PostgresTransaction, inout State) async throws -> Void
    ) async throws -> (acknowledged: [String], state: State) {
        var decisions = InboxBatch()
        let applicable = events.filter { self.screen($0, into: &decisions) }
        var recorded = Set<String>()
        if !applicable.isEmpty {
            let rows = try await transaction.query(
                """
                INSERT INTO events_inbox (event_id, producer, partition_key, sequence)
                SELECT * FROM unnest(\(applicable.map(\.eventId))::uuid[], \(applicable.map(\.producer))::text[],
                    \(applicable.map(\.partitionKey))::text[], \(applicable.map(\.sequence))::int8[])
                ON CONFLICT (event_id) DO NOTHING
                RETURNING event_id::text
                """
            )
            for row in rows { recorded.insert(try row.decode(String.self, at: 0)) }
        }
        var state = initial
        for event in applicable {
            // A duplicate within the batch, or an event recorded before: acknowledged without effect.
            if recorded.remove(event.eventId.lowercased()) != nil {
                do {
                    try await EventTracing.handling(event) { try await handler(event, transaction, &state) }
                } catch let error as PostgresError where error.code == .connectionLost {
                    throw error
                } catch {
                    throw HandlerFailedInWholeBatch()
                }
            }
            decisions.acknowledge(event)
        }
        return (decisions.acknowledged, state)
    }
}

/// A handler threw while its batch was applied whole: the attempt is rolled back and made again with savepoints.
private struct HandlerFailedInWholeBatch: Error {}
