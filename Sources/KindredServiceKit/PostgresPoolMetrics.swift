import CoreMetrics
import KindredGRPC
import KindredPostgres
import NIOConcurrencyHelpers

/// A PostgreSQL pool's statistics as swift-metrics, labelled `pool`:
///
/// - `db_pool_connections{pool,state}` (gauge; `in_use`, `idle`, `opening`), `db_pool_waiting{pool}` (gauge);
/// - `db_pool_opened_total`, `db_pool_closed_total`, `db_pool_acquire_timeouts_total` (counters);
/// - `db_notifications_queued{pool}` (gauge), `db_notifications_sent_total`, `db_notifications_dropped_total`
///   (counters): the notifications the client sends after commits (`PostgresClient.queueNotification`).
///
/// The pool keeps these numbers in its state machine (`PostgresClient.statistics`); they are copied into the
/// backend by ``sample()``, which `attach(to:)` registers as a sampler of the server's metrics: it runs at every
/// scrape of the admin port (exact values, no work between scrapes) and, when the process bootstrapped another
/// backend, from the runner's `metrics-sampler` loop. Counters advance by the difference since the last sample.
public final class PostgresPoolMetrics: Sendable {
    private let statistics: @Sendable () -> PostgresPoolStatistics
    private let inUse, idle, opening, waiting, notificationsQueued: Gauge
    private let opened, closed, acquireTimeouts, notificationsSent, notificationsDropped: Counter
    private let last = NIOLockedValueBox<PostgresPoolStatistics?>(nil)

    public init(
        pool: String,
        factory: any MetricsFactory,
        statistics: @escaping @Sendable () -> PostgresPoolStatistics
    ) {
        self.statistics = statistics
        let label = [("pool", pool)]
        func connections(_ state: String) -> Gauge {
            Gauge(label: "db_pool_connections", dimensions: label + [("state", state)], factory: factory)
        }
        self.inUse = connections("in_use")
        self.idle = connections("idle")
        self.opening = connections("opening")
        self.waiting = Gauge(label: "db_pool_waiting", dimensions: label, factory: factory)
        self.opened = Counter(label: "db_pool_opened_total", dimensions: label, factory: factory)
        self.closed = Counter(label: "db_pool_closed_total", dimensions: label, factory: factory)
        self.acquireTimeouts = Counter(label: "db_pool_acquire_timeouts_total", dimensions: label, factory: factory)
        self.notificationsQueued = Gauge(label: "db_notifications_queued", dimensions: label, factory: factory)
        self.notificationsSent = Counter(label: "db_notifications_sent_total", dimensions: label, factory: factory)
        self.notificationsDropped = Counter(label: "db_notifications_dropped_total", dimensions: label, factory: factory)
    }

    /// Pool metrics of `database`, sampled whenever `metrics` samples.
    @discardableResult
    public static func attach(pool: String, database: PostgresClient, to metrics: ServerMetrics) -> PostgresPoolMetrics {
        let pool = PostgresPoolMetrics(pool: pool, factory: metrics.factory) { database.statistics }
        metrics.addSampler { pool.sample() }
        return pool
    }

    /// Copies the current statistics into the gauges and advances the counters.
    public func sample() {
        // Read under the lock, so two samples never count the same difference twice.
        let (now, before) = self.last.withLockedValue { last in
            let now = self.statistics()
            defer { last = now }
            return (now, last)
        }
        self.inUse.record(now.inUse)
        self.idle.record(now.idle)
        self.opening.record(now.opening)
        self.waiting.record(now.waiting)
        self.opened.increment(by: max(0, now.totalOpened - (before?.totalOpened ?? 0)))
        self.closed.increment(by: max(0, now.totalClosed - (before?.totalClosed ?? 0)))
        self.acquireTimeouts.increment(by: max(0, now.acquireTimeouts - (before?.acquireTimeouts ?? 0)))
        self.notificationsQueued.record(now.notificationsQueued)
        self.notificationsSent.increment(by: max(0, now.notificationsSent - (before?.notificationsSent ?? 0)))
        self.notificationsDropped.increment(by: max(0, now.notificationsDropped - (before?.notificationsDropped ?? 0)))
    }
}
