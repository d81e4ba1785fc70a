import CoreMetrics
import NIOConcurrencyHelpers

/// The relay's numbers per consumer, recorded through swift-metrics into the server's backend
/// (`ServerMetrics.factory`: the admin port's `/metrics` by default), and kept as exact tallies for
/// in-process queries (``consumer(_:)``).
///
/// - `kindred_events_pending{producer,consumer}`: events not yet acknowledged (gauge, recomputed every
///   `metricsInterval`).
/// - `kindred_events_oldest_pending_seconds{producer,consumer}`: age of the oldest of them (gauge).
/// - `kindred_events_delivered_total{producer,consumer}`: events acknowledged (counter).
/// - `kindred_events_delivery_failures_total{producer,consumer}`: DeliverEvents calls that failed or left
///   events unacknowledged (counter).
public final class EventRelayMetrics: Sendable {
    public struct Consumer: Sendable, Hashable {
        public var pending = 0
        public var oldestPendingSeconds = 0.0
        public var delivered = 0
        public var failures = 0
    }

    /// The swift-metrics handles of one consumer.
    private struct Handles {
        let pending: Gauge
        let oldestPending: Gauge
        let delivered: Counter
        let failures: Counter
    }

    public let producer: String
    private let factory: any MetricsFactory
    private let state: NIOLockedValueBox<[String: (numbers: Consumer, handles: Handles)]>

    /// Metrics of `producer`'s relay to `consumers`, recorded into `factory` (no backend by default: tallies only).
    public init(producer: String, consumers: [String], factory: any MetricsFactory = NOOPMetricsHandler.instance) {
        self.producer = producer
        self.factory = factory
        self.state = NIOLockedValueBox([:])
        self.state.withLockedValue { state in
            for name in consumers { state[name] = (Consumer(), self.makeHandles(name)) }
        }
    }

    private func makeHandles(_ consumer: String) -> Handles {
        let dimensions = [("producer", self.producer), ("consumer", consumer)]
        return Handles(
            pending: Gauge(label: "kindred_events_pending", dimensions: dimensions, factory: self.factory),
            oldestPending: Gauge(label: "kindred_events_oldest_pending_seconds", dimensions: dimensions, factory: self.factory),
            delivered: Counter(label: "kindred_events_delivered_total", dimensions: dimensions, factory: self.factory),
            failures: Counter(label: "kindred_events_delivery_failures_total", dimensions: dimensions, factory: self.factory)
        )
    }

    /// Updates the tallies of `consumer` under the lock and returns its handles.
    private func update(_ consumer: String, _ body: (inout Consumer) -> Void) -> Handles {
        self.state.withLockedValue { state in
            if state[consumer] == nil { state[consumer] = (Consumer(), self.makeHandles(consumer)) }
            body(&state[consumer]!.numbers)
            return state[consumer]!.handles
        }
    }

    /// The numbers of one consumer.
    public func consumer(_ name: String) -> Consumer {
        self.state.withLockedValue { $0[name]?.numbers ?? Consumer() }
    }

    func recordDelivered(_ consumer: String, count: Int) {
        self.update(consumer) { $0.delivered += count }.delivered.increment(by: count)
    }

    func recordFailure(_ consumer: String) {
        self.update(consumer) { $0.failures += 1 }.failures.increment()
    }

    func setPending(_ consumer: String, count: Int, oldestSeconds: Double) {
        let handles = self.update(consumer) {
            $0.pending = count
            $0.oldestPendingSeconds = oldestSeconds
        }
        handles.pending.record(count)
        handles.oldestPending.record(oldestSeconds)
    }
}
