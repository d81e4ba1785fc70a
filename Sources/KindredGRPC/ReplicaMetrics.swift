import CoreMetrics

/// The metrics of one replica of a client's target (targets with several replicas only):
/// `grpc_client_replica_calls_total`, `grpc_client_replica_retries_total{reason}` (calls that failed there and went
/// to another replica: `unprocessed` or `interrupted`, see `ReplicaBalancer`) and `grpc_client_replica_up` (1 while
/// it takes calls), each with the target's authority and the replica's address.
struct ReplicaMetrics: Sendable {
    let calls: CoreMetrics.Counter
    let up: CoreMetrics.Gauge
    private let retriedUnprocessed: CoreMetrics.Counter
    private let retriedInterrupted: CoreMetrics.Counter

    init(target: String, replica: String, factory: (any MetricsFactory)?) {
        let factory = factory ?? MetricsSystem.factory
        let dimensions = [("target", target), ("replica", replica)]
        self.calls = CoreMetrics.Counter(label: "grpc_client_replica_calls_total", dimensions: dimensions, factory: factory)
        self.up = CoreMetrics.Gauge(label: "grpc_client_replica_up", dimensions: dimensions, factory: factory)
        self.retriedUnprocessed = CoreMetrics.Counter(
            label: "grpc_client_replica_retries_total", dimensions: dimensions + [("reason", "unprocessed")],
            factory: factory)
        self.retriedInterrupted = CoreMetrics.Counter(
            label: "grpc_client_replica_retries_total", dimensions: dimensions + [("reason", "interrupted")],
            factory: factory)
        self.up.record(1)
    }

    func retried(_ reason: ClientCall.Retry) {
        switch reason {
        case .unprocessed: self.retriedUnprocessed.increment()
        case .interrupted: self.retriedInterrupted.increment()
        case .no: break
        }
    }
}
