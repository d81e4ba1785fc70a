import CoreMetrics
import KindredGRPC
import KindredPostgres
import KindredServiceKit
import Prometheus
import Synchronization
import Testing

@Suite("Pool metrics")
struct PostgresPoolMetricsTests {
    @Test("gauges show the last sample; counters advance by the difference between samples")
    func sampledAtScrape() {
        let statistics = Mutex(
            PostgresPoolStatistics(inUse: 2, idle: 1, opening: 0, waiting: 3, totalOpened: 5, totalClosed: 1, acquireTimeouts: 0)
        )
        let server = ServerMetrics(registry: PrometheusCollectorRegistry())
        let pool = PostgresPoolMetrics(pool: "auth", factory: server.factory) { statistics.withLock { $0 } }
        server.addSampler { pool.sample() }
        var text = server.prometheusText()
        #expect(text.contains("db_pool_connections{pool=\"auth\",state=\"in_use\"} 2.0\n"))
        #expect(text.contains("db_pool_waiting{pool=\"auth\"} 3.0\n"))
        #expect(text.contains("db_pool_opened_total{pool=\"auth\"} 5\n"))
        #expect(text.contains("db_pool_acquire_timeouts_total{pool=\"auth\"} 0\n"))
        #expect(text.contains("db_notifications_sent_total{pool=\"auth\"} 0\n"))
        statistics.withLock {
            $0.inUse = 0
            $0.totalOpened = 7
            $0.acquireTimeouts = 1
            $0.notificationsQueued = 4
            $0.notificationsSent = 12
            $0.notificationsDropped = 2
        }
        text = server.prometheusText()
        #expect(text.contains("db_pool_connections{pool=\"auth\",state=\"in_use\"} 0.0\n"))
        #expect(text.contains("db_pool_opened_total{pool=\"auth\"} 7\n"))
        #expect(text.contains("db_pool_acquire_timeouts_total{pool=\"auth\"} 1\n"))
        #expect(text.contains("db_notifications_queued{pool=\"auth\"} 4.0\n"))
        #expect(text.contains("db_notifications_sent_total{pool=\"auth\"} 12\n"))
        #expect(text.contains("db_notifications_dropped_total{pool=\"auth\"} 2\n"))
        // A scrape without change adds nothing.
        #expect(server.prometheusText().contains("db_pool_opened_total{pool=\"auth\"} 7\n"))
    }
}
