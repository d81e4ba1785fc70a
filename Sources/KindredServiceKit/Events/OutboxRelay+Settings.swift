import CoreMetrics
import KindredIdentity
import KindredPostgres
import Logging

extension OutboxRelay {
    /// The relay of `producer`'s outbox to the consumers its settings name (`KINDRED_<SERVER>_EVENT_CONSUMERS`,
    /// `_EVENT_POLL_MS`), or nil when none is named or the server cannot sign service tokens: its events then wait
    /// in the outbox.
    public convenience init?(
        producer: String,
        settings: EventRelaySettings,
        database: PostgresClient,
        tokens: ServiceTokenSource?,
        metricsFactory: any MetricsFactory,
        logger: Logger
    ) {
        guard let tokens, !settings.consumers.isEmpty else { return nil }
        var configuration = OutboxRelayConfiguration(producer: producer, consumers: settings.consumers)
        configuration.pollInterval = settings.pollInterval
        self.init(
            configuration: configuration, database: database, tokens: tokens, metricsFactory: metricsFactory,
            logger: logger)
    }
}
