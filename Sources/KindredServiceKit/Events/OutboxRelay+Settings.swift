import CoreMetrics
import KindredIdentity
import KindredPostgres
import Logging

extension OutboxRelay {
    /// The relay of `producer`'s outbox to the consumers its settings name (`KINDRED_<SERVER>_EVENT_CONSUMERS`,
    /// `_EVENT_POLL_MS`), or nil when none is named or the server cannot sign service tokens: its events then wait
    /// in the outbox. With `KINDRED_EVENTS_NATS_URL` it publishes every event on JetStream instead (consumers or
    /// not: they follow the stream themselves), and `producer`'s waits for its consumers go through the bus.
    public convenience init?(
        producer: String,
        settings: EventRelaySettings,
        database: PostgresClient,
        tokens: ServiceTokenSource?,
        metricsFactory: any MetricsFactory,
        logger: Logger
    ) {
        if settings.bus.usesNATS {
            let bus = JetStreamEventBus(settings: settings.bus, name: producer + "-relay", logger: logger)
            var configuration = OutboxRelayConfiguration(producer: producer, consumers: [])
            configuration.pollInterval = settings.pollInterval
            self.init(configuration: configuration, bus: bus, database: database, metricsFactory: metricsFactory, logger: logger)
            return
        }
        guard let tokens, !settings.consumers.isEmpty else { return nil }
        var configuration = OutboxRelayConfiguration(producer: producer, consumers: settings.consumers)
        configuration.pollInterval = settings.pollInterval
        self.init(
            configuration: configuration, database: database, tokens: tokens, metricsFactory: metricsFactory,
            logger: logger)
    }
}
