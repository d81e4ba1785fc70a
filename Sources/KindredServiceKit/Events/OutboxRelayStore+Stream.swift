import KindredPostgres

extension OutboxRelayStore {
    /// Compares the stream `observe` reports with the one recorded in `publisher`'s `events_consumers` row
    /// (``StreamContinuity``), records what it saw, and when the stream lacks what the cursors say was published,
    /// sets `publisher`'s cursors back to the start of what the outbox still holds, so it is all published again.
    ///
    /// One transaction holding the publisher's row (`FOR NO KEY UPDATE`: appends, whose cursor rows refer to it, take
    /// only `KEY SHARE`), with the stream observed inside it: replicas check one after the other, each seeing a last
    /// sequence at least as high as the one the previous recorded, so a check never mistakes another replica's newer
    /// record for a stream gone back.
    ///
    /// The cursors set back lose their leases: a batch another replica has out records nothing (its lease is gone)
    /// and is published again in order with the rest. A stream gone back (``StreamContinuity/rewound``) is first
    /// replaced by `renew` (deleted and created again, empty): its durable consumers may be ahead of its messages
    /// (a copy of a live store is torn) and would skip the events published again.
    func checkStream(
        publisher: String, observe: () async throws -> StreamMark, renew: () async throws -> StreamMark
    ) async throws -> (continuity: StreamContinuity, partitions: Int) {
        try await self.database.withTransaction { transaction -> (continuity: StreamContinuity, partitions: Int) in
            let rows = try await transaction.query(
                """
                SELECT stream_created, stream_sequence FROM events_consumers WHERE consumer = \(publisher)
                FOR NO KEY UPDATE
                """
            )
            guard let row = rows.first else { return (.unrecorded, 0) }  // not registered yet: nothing published
            let (created, sequence) = try row.decode((String?, Int64).self)
            var observed = try await observe()
            let continuity = StreamContinuity(
                recorded: created.map { StreamMark(created: $0, lastSequence: sequence) }, observed: observed)
            if continuity == .continuous && observed.lastSequence <= sequence { return (continuity, 0) }
            if continuity == .rewound { observed = try await renew() }
            try await transaction.execute(
                """
                UPDATE events_consumers SET stream_created = \(observed.created), stream_sequence = \(observed.lastSequence)
                WHERE consumer = \(publisher)
                """
            )
            guard continuity.republishes else { return (continuity, 0) }
            // Cursor rows locked in partition-key order, the order appends and `record` take them.
            let partitions = try await transaction.execute(
                """
                WITH held AS (
                    SELECT partition_key, min(sequence) AS first, min(created_at) AS oldest
                    FROM events_outbox GROUP BY partition_key
                ), locked AS (
                    SELECT c.partition_key FROM events_cursors c JOIN held h ON h.partition_key = c.partition_key
                    WHERE c.consumer = \(publisher) AND c.acknowledged_sequence >= h.first
                    ORDER BY c.partition_key FOR UPDATE OF c
                )
                UPDATE events_cursors c SET acknowledged_sequence = h.first - 1, attempts = 0, next_attempt_at = now(),
                    last_error = NULL, leased_by = NULL, leased_until = NULL, pending_since = h.oldest
                FROM locked JOIN held h ON h.partition_key = locked.partition_key
                WHERE c.consumer = \(publisher) AND c.partition_key = locked.partition_key
                """
            )
            return (continuity, partitions)
        }
    }
}
