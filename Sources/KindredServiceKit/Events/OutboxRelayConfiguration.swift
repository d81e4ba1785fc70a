/// How an ``OutboxRelay`` delivers one producer's outbox.
///
/// A server reads the consumer list from `KINDRED_<SERVER>_EVENT_CONSUMERS` (``EventConsumer/parseList(_:key:)``;
/// default empty: events stay pending until a consumer is configured); the other fields have defaults meant
/// for production and are shortened by tests.
public struct OutboxRelayConfiguration: Sendable {
    /// The producing service (the outbox's `Outbox.producer`).
    public var producer: String
    /// Where events go. Each consumer has its own cursor per partition: a slow or absent consumer delays only
    /// itself.
    public var consumers: [EventConsumer]
    /// How often the relay looks for due work without a notification (retries after backoff, missed
    /// NOTIFYs). Default 1 s.
    public var pollInterval: Duration = .seconds(1)
    /// How long a claimed partition stays reserved for this relay. A relay that dies holding one delays that
    /// partition by at most this. Must exceed ``callTimeout``. Default 30 s.
    public var lease: Duration = .seconds(30)
    /// Deadline of one DeliverEvents call. Default 10 s.
    public var callTimeout: Duration = .seconds(10)
    /// Backoff of a partition whose delivery failed. Default 200 ms doubling to 60 s, with jitter. Once one of
    /// a consumer's failed partitions is delivered, its others are due at once.
    public var backoff = RetryBackoff()
    /// Events per DeliverEvents call, 1...100. Default 100 (the contract's maximum).
    public var maxBatch = DeliveryPlan.maxBatch
    /// Partitions claimed at once. Default 100.
    public var partitionsPerClaim = 100
    /// Delivery loops per consumer, 1...16. Default 4. Each loop claims its own partitions (the claim skips
    /// partitions another loop or replica holds), so order per partition is kept while one loop's round trips
    /// (claim, read, call, record) overlap another's: calls waiting for a consumer's acknowledgement (a match
    /// waiting for chat) see a delivery latency of about one round, not the length of one loop's queue.
    public var loopsPerConsumer = 4
    /// How often the pending and oldest-age gauges are recomputed. Default 5 s.
    public var metricsInterval: Duration = .seconds(5)
    /// On the JetStream bus, how often the relay checks that its stream still holds what its cursors say was
    /// published (``StreamContinuity``), besides once at start. Default 2 s.
    public var streamCheckInterval: Duration = .seconds(2)
    /// Delivered events older than this are deleted from the outbox. Default 7 days.
    public var retention: Duration = .seconds(7 * 86_400)
    /// The event types of the consumers named here, instead of their service's in ``EventSubscriptions`` (tests'
    /// consumers). Default empty.
    public var eventTypes: [String: Set<EventType>] = [:]

    /// The event types `consumer` is sent: nil for every type.
    public func types(of consumer: EventConsumer) -> Set<EventType>? {
        self.eventTypes[consumer.name] ?? EventSubscriptions.types(of: consumer.service, from: self.producer)
    }

    public init(producer: String, consumers: [EventConsumer]) {
        self.producer = producer
        self.consumers = consumers
    }
}
