import NIOConcurrencyHelpers

/// The open-connection cap of one HTTP/1.1 port (`HTTP1Limits.maxConnections`), shared by the loops that accept
/// its connections and the ones that close them; each admission and refusal is counted in `HTTP1PortMetrics`.
final class HTTP1ConnectionSlots: Sendable {
    private let limit: Int
    private let open = NIOLockedValueBox(0)
    private let metrics: HTTP1PortMetrics

    init(limit: Int, metrics: HTTP1PortMetrics) {
        self.limit = limit
        self.metrics = metrics
    }

    /// Takes a slot for a new connection: false (counted as refused) when the port is at its cap, and the
    /// connection must be closed.
    func take() -> Bool {
        let admitted = self.open.withLockedValue { open -> Bool in
            guard open < self.limit else { return false }
            open += 1
            return true
        }
        if admitted { self.metrics.opened() } else { self.metrics.refused() }
        return admitted
    }

    /// Gives back the slot of a connection that closed (one `take()` returned true for).
    func giveBack() {
        self.open.withLockedValue { $0 -= 1 }
        self.metrics.closed()
    }
}
