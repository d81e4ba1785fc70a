import CoreMetrics
import KindredGRPC
import KindredGRPCServices
import NIOConcurrencyHelpers

/// The gateway's own counters, recorded through swift-metrics into the server's backend
/// (`ServerMetrics.factory`), next to the runtime's per-method ones on `/metrics`:
///
/// - `gateway_rate_limited_total{bucket}`: calls refused by a rate limit;
/// - `gateway_rejected_tokens_total`: calls refused for a missing, expired or invalid token;
/// - `gateway_downstream_calls_total{service,grpc_code}`: calls to the services, by status code;
/// - `gateway_partial_parts_total{part}`: parts left out of aggregated answers (slow, failed or not deployed);
/// - `gateway_session_check_unavailable_total`: calls refused with UNAVAILABLE because the set of ended
///   sessions was stale;
/// - the media port's `http_connections_open`, `http_connections_refused_total`, `http_timeouts_total{timeout}`
///   with `port="media"` (`HTTP1PortMetrics`).
///
/// Labelled counters are made on first use and cached (one locked dictionary hit per event).
public final class GatewayMetrics: Sendable {
    private struct Key: Hashable {
        let name: String
        let labels: [String]
    }

    private let factory: any MetricsFactory
    private let counters = NIOLockedValueBox([Key: Counter]())
    private let rejectedTokens: Counter
    private let sessionCheckUnavailable: Counter
    /// The media port's connection counters.
    public let mediaPort: HTTP1PortMetrics

    public init(factory: any MetricsFactory) {
        self.factory = factory
        self.mediaPort = HTTP1PortMetrics(port: "media", factory: factory)
        self.rejectedTokens = Counter(label: "gateway_rejected_tokens_total", factory: factory)
        self.sessionCheckUnavailable = Counter(label: "gateway_session_check_unavailable_total", factory: factory)
    }

    private func counter(_ name: String, _ dimensions: [(String, String)]) -> Counter {
        let key = Key(name: name, labels: dimensions.map(\.1))
        return self.counters.withLockedValue { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(label: name, dimensions: dimensions, factory: self.factory)
            counters[key] = counter
            return counter
        }
    }

    func rateLimited(bucket: String) { self.counter("gateway_rate_limited_total", [("bucket", bucket)]).increment() }
    func rejectedToken() { self.rejectedTokens.increment() }
    func downstreamFinished(service: String, code: StatusCode) {
        self.counter("gateway_downstream_calls_total", [("service", service), ("grpc_code", code.description)]).increment()
    }
    func revocationUnavailable() { self.sessionCheckUnavailable.increment() }
    func partMissing(_ part: String) { self.counter("gateway_partial_parts_total", [("part", part)]).increment() }
    /// gateway_chat_streams_refused_total{reason}: Subscribe streams refused (`user_cap`, `fair_share`, `full`).
    func chatStreamRefused(reason: String) {
        self.counter("gateway_chat_streams_refused_total", [("reason", reason)]).increment()
    }
    /// gateway_chat_streams_resumed_total: Subscribe streams resumed on another chat replica (theirs died or drained).
    func chatStreamResumed() {
        self.counter("gateway_chat_streams_resumed_total", []).increment()
    }
    /// gateway_media_requests_total{status}: answers of the media port by HTTP status.
    func mediaRequest(status: Int) { self.counter("gateway_media_requests_total", [("status", "\(status)")]).increment() }
}
