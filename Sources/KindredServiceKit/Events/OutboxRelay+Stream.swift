import Logging

extension OutboxRelay {
    /// On the JetStream bus: checks that the producer's stream still holds what this relay's cursors say was
    /// published, and when it does not (the stream replaced or rewound: ``StreamContinuity``), sets the cursors back
    /// so the outbox is published again; the consumers' inboxes drop the events they applied before. ``run()`` checks
    /// once before its first delivery and then every ``OutboxRelayConfiguration/streamCheckInterval``.
    ///
    /// Nothing is lost as long as the outbox holds every event some consumer has not applied yet: on the bus the
    /// relay purges an event only past ``OutboxRelayConfiguration/retention`` (7 days, the stream's own age limit,
    /// below the inboxes' 8 days of ids). The push relay (no bus) has nothing to check.
    @discardableResult
    public func checkStream() async throws -> Bool {
        guard let bus = self.bus else { return false }
        let producer = self.configuration.producer
        let (continuity, partitions) = try await self.store.checkStream(
            publisher: JetStreamEventBus.relayConsumer,
            observe: { try await bus.streamMark(producer: producer) },
            renew: { try await bus.renewStream(producer: producer) })
        guard continuity.republishes else { return false }
        self.logger.warning(
            "events bus: the stream lacks events the relay had published; publishing the outbox again",
            metadata: [
                "events.producer": "\(producer)", "events.stream": "\(continuity)", "events.partitions": "\(partitions)",
            ])
        return true
    }
}
