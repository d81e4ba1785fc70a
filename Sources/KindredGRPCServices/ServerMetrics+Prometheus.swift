import CoreMetrics
import KindredGRPC
import Prometheus

extension PrometheusCollectorRegistry: MetricsExposition {}

extension ServerMetrics {
    /// Every Kindred server's metrics: a private Prometheus registry (`registry`, else a new one) that the admin
    /// port renders on `/metrics`, so several servers in one process never share a counter. A process that
    /// bootstrapped `MetricsSystem` with another backend before building its servers records there instead, with
    /// no registry (unless `registry` is given).
    public static func prometheus(registry: PrometheusCollectorRegistry? = nil) -> ServerMetrics {
        if registry == nil, !(MetricsSystem.factory is NOOPMetricsHandler) {
            return ServerMetrics(factory: MetricsSystem.factory)
        }
        let registry = registry ?? PrometheusCollectorRegistry()
        return ServerMetrics(factory: PrometheusMetricsFactory(registry: registry), registry: registry)
    }
}
