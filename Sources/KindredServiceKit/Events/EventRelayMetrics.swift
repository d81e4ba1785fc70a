import NIOConcurrencyHelpers

/// The relay's numbers per consumer, rendered in the Prometheus text format next to the server's own
/// (`ServerRunner.extraMetrics`, the admin port's `/metrics`) — the same mechanism as `ServerMetrics`, so a
/// move to swift-metrics moves these with the rest.
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

    public let producer: String
    private let state: NIOLockedValueBox<[String: Consumer]>

    public init(producer: String, consumers: [String]) {
        self.producer = producer
        self.state = NIOLockedValueBox(Dictionary(uniqueKeysWithValues: consumers.map { ($0, Consumer()) }))
    }

    /// The numbers of one consumer.
    public func consumer(_ name: String) -> Consumer {
        self.state.withLockedValue { $0[name] ?? Consumer() }
    }

    func recordDelivered(_ consumer: String, count: Int) {
        self.state.withLockedValue { $0[consumer, default: Consumer()].delivered += count }
    }

    func recordFailure(_ consumer: String) {
        self.state.withLockedValue { $0[consumer, default: Consumer()].failures += 1 }
    }

    func setPending(_ consumer: String, count: Int, oldestSeconds: Double) {
        self.state.withLockedValue {
            $0[consumer, default: Consumer()].pending = count
            $0[consumer, default: Consumer()].oldestPendingSeconds = oldestSeconds
        }
    }

    public func prometheusText() -> String {
        let consumers = self.state.withLockedValue { $0 }.sorted { $0.key < $1.key }
        func family(_ name: String, _ type: String, _ help: String, _ value: (Consumer) -> String) -> String {
            var out = "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for (consumer, numbers) in consumers {
                out += "\(name){producer=\"\(self.producer)\",consumer=\"\(consumer)\"} \(value(numbers))\n"
            }
            return out
        }
        return family("kindred_events_pending", "gauge", "Events not yet acknowledged by the consumer.") {
            "\($0.pending)"
        }
            + family("kindred_events_oldest_pending_seconds", "gauge", "Age of the oldest unacknowledged event.") {
                "\($0.oldestPendingSeconds)"
            }
            + family("kindred_events_delivered_total", "counter", "Events acknowledged by the consumer.") {
                "\($0.delivered)"
            }
            + family(
                "kindred_events_delivery_failures_total",
                "counter",
                "DeliverEvents calls that failed or left events unacknowledged."
            ) { "\($0.failures)" }
    }
}
