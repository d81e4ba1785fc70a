import KindredPostgres

/// The relay's SQL on the producer's `events_*` tables (``Outbox/schemaSQL``), one statement per step.
struct OutboxRelayStore: Sendable {
    let database: PostgresClient
    /// This relay's name in `events_cursors.leased_by`.
    let owner: String
    /// The `event_type` values each consumer applies, sorted (``OutboxRelayConfiguration/types(of:)``); a consumer
    /// not in it gets every type.
    var typeNames: [String: [String]] = [:]

    /// Adds the configured consumers to `events_consumers`, each with the types it applies (NULL: all), and
    /// updates the types of those already there: appends from now on mark a consumer pending for those types only.
    func register(consumers: [String]) async throws {
        // Each consumer's types as one comma-separated text, "*" for all (a SQL array of arrays must be rectangular).
        let types: [String] = consumers.map { self.typeNames[$0]?.joined(separator: ",") ?? "*" }
        try await self.database.execute(
            """
            INSERT INTO events_consumers (consumer, event_types)
            SELECT consumer, CASE WHEN types = '*' THEN NULL ELSE string_to_array(types, ',') END
            FROM unnest(\(consumers)::text[], \(types)::text[]) AS c(consumer, types)
            ON CONFLICT (consumer) DO UPDATE SET event_types = EXCLUDED.event_types
                WHERE events_consumers.event_types IS DISTINCT FROM EXCLUDED.event_types
            """
        )
    }

    /// `consumer`'s types as the statements below filter on them: every type when it applies all.
    private func filter(of consumer: String) -> (all: Bool, types: [String]) {
        guard let types = self.typeNames[consumer] else { return (true, []) }
        return (false, types)
    }

    /// Adds the bus's pseudo-consumer `name` (``JetStreamEventBus/relayConsumer``); the first time, with a cursor at
    /// the start of every partition the outbox has, so everything it still holds is published (the consumers'
    /// inboxes drop what they already applied through the push relay).
    func registerPublisher(_ name: String) async throws {
        try await self.database.execute(
            """
            WITH added AS (
                INSERT INTO events_consumers (consumer) VALUES (\(name)) ON CONFLICT DO NOTHING RETURNING consumer
            )
            INSERT INTO events_cursors (consumer, partition_key, appended_sequence, pending_since)
            SELECT added.consumer, p.partition_key, p.last_sequence, now() FROM added, events_partitions p
            ORDER BY p.partition_key
            ON CONFLICT DO NOTHING
            """
        )
    }

    /// Leases up to `limit` due partitions of `consumer` that no other relay holds, oldest pending first.
    ///
    /// `FOR UPDATE SKIP LOCKED` lets replicas claim side by side without waiting on each other; a row another
    /// replica leased and committed meanwhile is re-checked against the conditions and skipped. A lease, not
    /// a lock, then reserves the partition while its batch is out, so one partition is worked on by one
    /// relay at a time and its order holds.
    ///
    /// The due rows come from `events_cursors_due` in claim order, so the scan stops at `limit`; the leases are
    /// then written by primary key (`partition_key = ANY(…)`): joined to the due rows instead, the plan made for a
    /// table of a few thousand rows read all of them, at every claim.
    func claim(consumer: String, limit: Int, lease: Duration) async throws -> [ClaimedPartition] {
        let rows = try await self.bookkeeping(self.claimQuery(consumer: consumer, limit: limit, lease: lease))
        return try rows.map { row in
            let (partition, acknowledged, appended, attempts) = try row.decode((String, Int64, Int64, Int32).self)
            return ClaimedPartition(
                partition: partition, acknowledged: acknowledged, appended: appended, attempts: Int(attempts))
        }
    }

    /// The statement of ``claim(consumer:limit:lease:)``.
    func claimQuery(consumer: String, limit: Int, lease: Duration) -> PostgresQuery {
        """
            WITH due AS (
                SELECT partition_key FROM events_cursors
                WHERE consumer = \(consumer) AND acknowledged_sequence < appended_sequence
                  AND next_attempt_at <= now() AND (leased_until IS NULL OR leased_until < now())
                ORDER BY pending_since NULLS FIRST LIMIT \(Int64(limit))
                FOR UPDATE SKIP LOCKED
            )
            UPDATE events_cursors c SET leased_by = \(self.owner),
                leased_until = now() + make_interval(secs => \(lease.seconds))
            WHERE c.consumer = \(consumer) AND c.partition_key = ANY(ARRAY(SELECT partition_key FROM due))
            RETURNING c.partition_key, c.acknowledged_sequence, c.appended_sequence, c.attempts
            """
    }

    /// The events `consumer` applies after each claimed partition's cursor, in outbox order, at most `limit`.
    ///
    /// Each partition's first `limit` events come from the `(partition_key, sequence)` index, then the earliest
    /// of them all: read the other way (the outbox in id order, joined to the partitions), the plan walked every
    /// delivered event the outbox still keeps before reaching the pending ones.
    func events(of consumer: String, after claimed: [ClaimedPartition], limit: Int) async throws -> [OutboxEvent] {
        let (all, types) = self.filter(of: consumer)
        let rows = try await self.database.query(
            """
            SELECT o.event_id::text, o.partition_key, o.sequence, o.payload
            FROM unnest(\(claimed.map(\.partition))::text[], \(claimed.map(\.acknowledged))::int8[])
                AS k(partition_key, acknowledged)
            CROSS JOIN LATERAL (
                SELECT id, event_id, partition_key, sequence, payload FROM events_outbox
                WHERE partition_key = k.partition_key AND sequence > k.acknowledged
                  AND (\(all) OR event_type = ANY(\(types)::text[]))
                ORDER BY sequence LIMIT \(Int64(limit))
            ) o
            ORDER BY o.id LIMIT \(Int64(limit))
            """
        )
        return try rows.map { row in
            let (id, partition, sequence, payload) = try row.decode((String, String, Int64, [UInt8]).self)
            return OutboxEvent(eventID: id, partition: partition, sequence: sequence, payload: payload)
        }
    }

    /// Writes the outcome of a batch and ends this relay's leases on those partitions. Cursors only move
    /// forward (`GREATEST`), and only while this relay still holds the lease.
    ///
    /// Appends lock a partition's cursor rows until their transaction commits (``Outbox``). The outcomes are
    /// written first to every cursor no append holds (`SKIP LOCKED`), then to each held one alone, so the relay
    /// waits on one append at a time while holding no other cursor: an append to another partition never waits
    /// behind it, and a transaction appending to several partitions cannot wait on it in a circle.
    ///
    /// Returns true when a partition written still has events pending for the consumer (appended meanwhile, or left
    /// by a batch cut short).
    @discardableResult
    func record(
        consumer: String,
        outcomes: [String: DeliveryPlan.Outcome],
        delays: [String: Duration],
        error: String?
    ) async throws -> Bool {
        var written = try await self.write(consumer: consumer, outcomes, delays: delays, error: error, skipHeld: true)
        for (partition, outcome) in outcomes where written[partition] == nil {
            written.merge(
                try await self.write(
                    consumer: consumer, [partition: outcome], delays: delays, error: error, skipHeld: false)
            ) { $1 }
        }
        return written.values.contains(true)
    }

    /// One statement of ``record(consumer:outcomes:delays:error:)``: writes `outcomes` to the cursors this relay
    /// leases, skipping (`skipHeld`) or waiting on those another transaction holds; returns the partitions written,
    /// each with whether it is still pending.
    private func write(
        consumer: String,
        _ outcomes: [String: DeliveryPlan.Outcome],
        delays: [String: Duration],
        error: String?,
        skipHeld: Bool
    ) async throws -> [String: Bool] {
        let query = self.writeQuery(consumer: consumer, outcomes, delays: delays, error: error, skipHeld: skipHeld)
        let rows = try await self.bookkeeping(query)
        return Dictionary(try rows.map { try $0.decode((String, Bool).self) }) { $1 }
    }

    /// The statement of ``write(consumer:_:delays:error:skipHeld:)``.
    ///
    /// The write names its consumer itself (the primary key's first column), so each leased row is read by primary
    /// key whatever the plan: joined on `locked.consumer` instead, the plan a connection made while the table was
    /// small looked each row up by the key's second column alone, through the whole index (`ClaimPlanTests`).
    func writeQuery(
        consumer: String,
        _ outcomes: [String: DeliveryPlan.Outcome],
        delays: [String: Duration],
        error: String?,
        skipHeld: Bool
    ) -> PostgresQuery {
        var partitions: [String] = []
        var acknowledged: [Int64] = []
        var codes: [Int32] = []
        var delaySeconds: [Double] = []
        for (partition, outcome) in outcomes {
            partitions.append(partition)
            switch outcome {
            case .delivered(let cursor, _), .nothingPending(let cursor):
                acknowledged.append(cursor)
                codes.append(1)
            case .failed(let cursor, _):
                acknowledged.append(cursor)
                codes.append(2)
            case .untouched:
                acknowledged.append(0)
                codes.append(0)
            }
            delaySeconds.append(delays[partition]?.seconds ?? 0)
        }
        let (all, types) = self.filter(of: consumer)
        // Outcome codes: 0 untouched, 1 delivered (or nothing to send up to the cursor), 2 failed.
        return """
            WITH locked AS (
                SELECT partition_key FROM events_cursors
                WHERE consumer = \(consumer) AND partition_key = ANY(\(partitions)::text[]) AND leased_by = \(self.owner)
                ORDER BY partition_key FOR UPDATE \(unescaped: skipHeld ? "SKIP LOCKED" : "")
            )
            UPDATE events_cursors c SET
                acknowledged_sequence = GREATEST(c.acknowledged_sequence, u.acknowledged),
                attempts = CASE WHEN u.outcome = 2 THEN c.attempts + 1 WHEN u.outcome = 0 THEN c.attempts ELSE 0 END,
                next_attempt_at = CASE WHEN u.outcome = 2 THEN now() + make_interval(secs => u.delay)
                    ELSE c.next_attempt_at END,
                last_error = CASE WHEN u.outcome = 2 THEN \(error) WHEN u.outcome = 0 THEN c.last_error ELSE NULL END,
                leased_by = NULL, leased_until = NULL,
                -- The first pending event's time, read from the (partition_key, sequence) index (min(created_at)
                -- was planned as a walk of the whole outbox in created_at order); none once caught up.
                pending_since = CASE WHEN GREATEST(c.acknowledged_sequence, u.acknowledged) < c.appended_sequence THEN (
                    SELECT o.created_at FROM events_outbox o
                    WHERE o.partition_key = c.partition_key
                      AND o.sequence > GREATEST(c.acknowledged_sequence, u.acknowledged)
                      AND (\(all) OR o.event_type = ANY(\(types)::text[]))
                    ORDER BY o.sequence LIMIT 1
                ) END
            FROM locked JOIN unnest(\(partitions)::text[], \(acknowledged)::int8[], \(codes)::int4[],
                                     \(delaySeconds)::float8[]) AS u(partition_key, acknowledged, outcome, delay)
                ON u.partition_key = locked.partition_key
            WHERE c.consumer = \(consumer) AND c.partition_key = locked.partition_key AND c.leased_by = \(self.owner)
            RETURNING c.partition_key, c.acknowledged_sequence < c.appended_sequence
            """
    }

    /// Ends the backoff of `consumer`'s partitions that failed (it answers again): they are due at once. Rows
    /// another transaction holds are skipped (an append or a delivery in flight), so this never waits on them.
    func retryFailedNow(consumer: String) async throws {
        try await self.bookkeeping(
            """
            WITH due AS (
                SELECT consumer, partition_key FROM events_cursors
                WHERE consumer = \(consumer) AND attempts > 0 AND next_attempt_at > now()
                ORDER BY partition_key FOR UPDATE SKIP LOCKED
            )
            UPDATE events_cursors c SET next_attempt_at = now()
            FROM due WHERE c.consumer = due.consumer AND c.partition_key = due.partition_key
            """
        )
    }

    /// Ends every lease this relay holds (clean shutdown: the partitions are free at once, not at lease end).
    func releaseLeases() async throws {
        try await self.bookkeeping(
            "UPDATE events_cursors SET leased_by = NULL, leased_until = NULL WHERE leased_by = \(self.owner)"
        )
    }

    /// Runs `query` alone in a transaction whose COMMIT does not wait for its WAL to reach the disk
    /// (`synchronous_commit = off` for it alone), in one round trip: for the relay's own bookkeeping, its leases and
    /// cursors. A database crash can lose such a commit's last fraction of a second; that costs a redelivery (the
    /// consumers' inboxes apply each event once) or a lease that was never held (a batch possibly sent twice at once,
    /// which the inboxes take in order and once), never an event or an effect: those are committed by transactions
    /// that wait for the disk, and each of those also flushes every commit before it.
    @discardableResult
    private func bookkeeping(_ query: PostgresQuery) async throws -> PostgresRows {
        try await self.database.withTransaction { transaction in
            try await transaction.commit(after: [Self.withoutFlushWait, query])[1]
        }
    }

    private static let withoutFlushWait = PostgresQuery(unsafeSQL: "SET LOCAL synchronous_commit = off")

    /// Unacknowledged events of `consumer` and the age of the oldest, in seconds.
    func pending(consumer: String) async throws -> (count: Int, oldestSeconds: Double) {
        let (all, types) = self.filter(of: consumer)
        let rows = try await self.database.query(
            """
            SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(o.created_at)), 0)::float8
            FROM events_cursors c
            JOIN events_outbox o ON o.partition_key = c.partition_key
                AND o.sequence > c.acknowledged_sequence AND o.sequence <= c.appended_sequence
                AND (\(all) OR o.event_type = ANY(\(types)::text[]))
            WHERE c.consumer = \(consumer) AND c.acknowledged_sequence < c.appended_sequence
            """
        )
        let (count, oldest) = try rows[0].decode((Int64, Double).self)
        return (Int(count), oldest)
    }

    /// Deletes up to 1000 events older than `retention` that every consumer applying their type (or each of
    /// `consumers`, when given: on the bus, the publisher) has acknowledged, then the
    /// cursors and counters of partitions left without events (all caught up, none leased): a deleted
    /// user's id leaves the producer's tables with its last event. Returns how many events went.
    ///
    /// Cursor rows are locked in the appends' order (partition key, then consumer) before they go.
    /// A partition that gets a new event meanwhile is safe: its cursor no longer qualifies (the append
    /// moved `appended_sequence`), and a counter deleted under a concurrent append only makes the next
    /// append start again from the global counter, above every sequence the partition had.
    func purgeDelivered(retention: Duration, consumers: [String]? = nil) async throws -> Int {
        let all = consumers == nil
        let only = consumers ?? []
        let partitions = try await self.database.query(
            """
            WITH gone AS (
                DELETE FROM events_outbox WHERE id IN (
                    SELECT o.id FROM events_outbox o
                    WHERE o.created_at < now() - make_interval(secs => \(retention.seconds))
                      AND NOT EXISTS (
                          SELECT 1 FROM events_cursors c JOIN events_consumers k ON k.consumer = c.consumer
                          WHERE c.partition_key = o.partition_key AND c.acknowledged_sequence < o.sequence
                            AND (k.event_types IS NULL OR o.event_type = ANY(k.event_types))
                            AND (\(all) OR c.consumer = ANY(\(only)::text[]))
                      )
                    ORDER BY o.id LIMIT 1000
                )
                RETURNING partition_key
            )
            SELECT partition_key, count(*) FROM gone GROUP BY partition_key
            """
        ).map { try $0.decode((String, Int64).self) }
        guard !partitions.isEmpty else { return 0 }
        let keys = partitions.map(\.0)
        try await self.database.execute(
            """
            DELETE FROM events_cursors c USING (
                SELECT consumer, partition_key FROM events_cursors WHERE partition_key = ANY(\(keys)::text[])
                ORDER BY partition_key, consumer FOR UPDATE
            ) locked
            WHERE c.consumer = locked.consumer AND c.partition_key = locked.partition_key
              AND c.acknowledged_sequence >= c.appended_sequence AND c.leased_by IS NULL
              AND NOT EXISTS (SELECT 1 FROM events_outbox o WHERE o.partition_key = c.partition_key)
            """
        )
        try await self.database.execute(
            """
            DELETE FROM events_partitions p
            WHERE p.partition_key = ANY(\(keys)::text[])
              AND NOT EXISTS (SELECT 1 FROM events_outbox o WHERE o.partition_key = p.partition_key)
              AND NOT EXISTS (SELECT 1 FROM events_cursors c WHERE c.partition_key = p.partition_key)
            """
        )
        return Int(partitions.reduce(0) { $0 + $1.1 })
    }
}

extension Duration {
    /// The duration in seconds, as SQL's `make_interval(secs => …)` takes it.
    var seconds: Double {
        Double(self.components.seconds) + Double(self.components.attoseconds) / 1e18
    }
}
