import KindredPostgres

extension Outbox {
    /// Waits until each of `consumers` (the relay's configured ones) has acknowledged the events of `partition`
    /// committed so far (the partition's last sequence when the wait starts). True when they did within `timeout`
    /// (at once without consumers: nobody to wait for); false when a consumer is still behind (down, failing, or
    /// slow) at the end of it.
    ///
    /// For the writes whose contract says "effective everywhere from the moment the call returns" (match's Block
    /// and Unblock, a swipe that creates a match, profile's writes that the member's next deck or swipe reads):
    /// the relays are woken by the commit's NOTIFY and deliver within milliseconds, so the wait is short when the
    /// consumers are up; consumers acknowledge only after committing (and, for discovery, after updating its
    /// in-memory index), so an acknowledged event is an applied one. The cursors are read again whenever this
    /// process's relay records an answer for the partition (``DeliveryNotices``), and every `interval` for answers
    /// recorded by another replica's relay. A partition with no events (or none left after a purge), or a
    /// consumer without a cursor for it (registered after those events, or sent none of their types), has nothing
    /// to wait for; a consumer waits only for the events of the types it applies (``EventSubscriptions``: its
    /// cursor's last appended one).
    ///
    /// On the JetStream bus (this process's relay publishes: ``JetStreamEventBus/registered(producer:)``) the wait
    /// is in two steps within the same `timeout`: until the relay has published those events (its cursors), then
    /// until each consumer's durable consumer for the partition has acknowledged everything published so far.
    public func awaitDelivery(
        partition: String,
        consumers: [String],
        on database: PostgresClient,
        timeout: Duration = .seconds(3),
        interval: Duration = .milliseconds(25)
    ) async throws -> Bool {
        guard !consumers.isEmpty else { return true }
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        if let bus = JetStreamEventBus.registered(producer: self.producer) {
            guard
                try await self.awaitCursors(
                    partition: partition, consumers: [JetStreamEventBus.relayConsumer], on: database, timeout: timeout,
                    interval: interval)
            else { return false }
            return try await bus.consumersCaughtUp(
                producer: self.producer, partitionKey: partition, consumers: consumers,
                timeout: max(.zero, clock.now.duration(to: deadline)), interval: interval)
        }
        return try await self.awaitCursors(
            partition: partition, consumers: consumers, on: database, timeout: timeout, interval: interval)
    }

    /// The wait on the producer's cursors (`events_cursors`) of `consumers`.
    private func awaitCursors(
        partition: String,
        consumers: [String],
        on database: PostgresClient,
        timeout: Duration,
        interval: Duration
    ) async throws -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        let notices = DeliveryNotices.of(producer: self.producer)
        let watch = notices.watch(partition)
        defer { notices.end(watch) }
        let target = try await database.query(
            "SELECT COALESCE(max(last_sequence), 0) FROM events_partitions WHERE partition_key = \(partition)"
        ).scalar(Int64.self)
        guard target > 0 else { return true }
        while true {
            let behind = try await database.query(
                """
                SELECT count(*) FROM events_cursors
                WHERE consumer = ANY(\(consumers)::text[]) AND partition_key = \(partition)
                  AND acknowledged_sequence < LEAST(appended_sequence, \(target))
                """
            ).scalar(Int64.self)
            if behind == 0 { return true }
            let now = clock.now
            guard now < deadline else { return false }
            await notices.wait(watch, atMost: min(interval, now.duration(to: deadline)))
            try Task.checkCancellation()
        }
    }
}
