import KindredGRPCServices

/// Where a producer's events go, read the same way by every producer under its own prefix.
public struct EventRelaySettings: Sendable, Equatable {
    /// `KINDRED_<SERVER>_EVENT_CONSUMERS` (comma-separated `name=host:port`), default none. Events for consumers
    /// not listed wait in the outbox.
    public var consumers: [EventConsumer] = []
    /// `KINDRED_<SERVER>_EVENT_POLL_MS` (int, 10..60000), default 1000: how often the relay looks for due
    /// partitions besides the notices of new events.
    public var pollInterval: Duration = .seconds(1)
    /// `KINDRED_EVENTS_NATS_URL`: publish on NATS JetStream instead of calling the consumers (``EventBusSettings``).
    /// The consumers named above are then the ones the producer's writes wait for.
    public var bus = EventBusSettings()

    public init() {}

    public init(server: String, environment: EnvironmentReader) throws {
        let prefix = "KINDRED_\(server.uppercased())_"
        if let value = environment.string(prefix + "EVENT_CONSUMERS") {
            self.consumers = try EventConsumer.parseList(value, key: prefix + "EVENT_CONSUMERS")
        }
        self.pollInterval = try environment.milliseconds(
            prefix + "EVENT_POLL_MS", default: self.pollInterval, in: 10...60_000)
        self.bus = try EventBusSettings(environment: environment)
    }
}
