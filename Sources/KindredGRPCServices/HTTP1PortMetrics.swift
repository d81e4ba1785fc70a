import CoreMetrics
import NIOConcurrencyHelpers

/// The counters of one plain HTTP/1.1 port, labelled `port` (`admin`, `media`), recorded through swift-metrics
/// (the server's `ServerMetrics.factory`, so they show on `/metrics`):
///
/// - `http_connections_open{port}`: connections open now;
/// - `http_connections_refused_total{port}`: connections closed as they were accepted, past `maxConnections`;
/// - `http_timeouts_total{port,timeout}`: connections closed by a timeout (`header`, `body`, `idle`).
///
/// Beside the backend it keeps exact tallies for in-process queries (tests).
public final class HTTP1PortMetrics: Sendable {
    private struct Tallies {
        var open = 0
        var refused = 0
        var timeouts: [String: Int] = [:]
    }

    private let open: Meter
    private let refusedTotal: CoreMetrics.Counter
    private let timeoutsTotal: [String: CoreMetrics.Counter]
    private let tallies = NIOLockedValueBox(Tallies())

    public init(port: String, factory: any MetricsFactory) {
        self.open = Meter(label: "http_connections_open", dimensions: [("port", port)], factory: factory)
        self.refusedTotal = CoreMetrics.Counter(
            label: "http_connections_refused_total",
            dimensions: [("port", port)],
            factory: factory
        )
        self.timeoutsTotal = Dictionary(
            uniqueKeysWithValues: HTTP1ConnectionTimer.Timeout.allCases.map {
                (
                    $0.rawValue,
                    CoreMetrics.Counter(
                        label: "http_timeouts_total",
                        dimensions: [("port", port), ("timeout", $0.rawValue)],
                        factory: factory
                    )
                )
            }
        )
    }

    /// Connections open now.
    public var openConnections: Int { self.tallies.withLockedValue { $0.open } }
    /// Connections refused past the cap so far.
    public var refusedConnections: Int { self.tallies.withLockedValue { $0.refused } }
    /// Connections closed by `timeout` (`header`, `body`, `idle`) so far.
    public func timeouts(_ timeout: String) -> Int { self.tallies.withLockedValue { $0.timeouts[timeout, default: 0] } }

    func opened() {
        self.open.increment()
        self.tallies.withLockedValue { $0.open += 1 }
    }

    func closed() {
        self.open.decrement()
        self.tallies.withLockedValue { $0.open -= 1 }
    }

    func refused() {
        self.refusedTotal.increment()
        self.tallies.withLockedValue { $0.refused += 1 }
    }

    func timedOut(_ timeout: HTTP1ConnectionTimer.Timeout) {
        self.timeoutsTotal[timeout.rawValue]?.increment()
        self.tallies.withLockedValue { $0.timeouts[timeout.rawValue, default: 0] += 1 }
    }
}
