import KindredGRPC
import NIOConcurrencyHelpers

/// The gateway's own counters, next to the runtime's per-method ones on `/metrics`.
public final class GatewayMetrics: Sendable {
    private struct State {
        var rateLimited: [String: Int] = [:]
        var unauthenticated = 0
        var downstream: [String: [String: Int]] = [:]
        var partialAnswers: [String: Int] = [:]
        var revocationUnavailable = 0
    }

    private let state = NIOLockedValueBox(State())

    public init() {}

    func rateLimited(bucket: String) { self.state.withLockedValue { $0.rateLimited[bucket, default: 0] += 1 } }
    func rejectedToken() { self.state.withLockedValue { $0.unauthenticated += 1 } }
    func downstreamFinished(service: String, code: StatusCode) {
        self.state.withLockedValue { $0.downstream[service, default: [:]][code.description, default: 0] += 1 }
    }
    func revocationUnavailable() { self.state.withLockedValue { $0.revocationUnavailable += 1 } }
    func partMissing(_ part: String) { self.state.withLockedValue { $0.partialAnswers[part, default: 0] += 1 } }

    public func prometheusText() -> String {
        let state = self.state.withLockedValue { $0 }
        var out = "# HELP gateway_rate_limited_total Calls refused by a rate limit, by bucket.\n"
        out += "# TYPE gateway_rate_limited_total counter\n"
        for (bucket, count) in state.rateLimited.sorted(by: { $0.key < $1.key }) {
            out += "gateway_rate_limited_total{bucket=\"\(bucket)\"} \(count)\n"
        }
        out += "# HELP gateway_rejected_tokens_total Calls refused for a missing, expired or invalid token.\n"
        out += "# TYPE gateway_rejected_tokens_total counter\n"
        out += "gateway_rejected_tokens_total \(state.unauthenticated)\n"
        out += "# HELP gateway_downstream_calls_total Calls to the services, by service and status code.\n"
        out += "# TYPE gateway_downstream_calls_total counter\n"
        for (service, codes) in state.downstream.sorted(by: { $0.key < $1.key }) {
            for (code, count) in codes.sorted(by: { $0.key < $1.key }) {
                out += "gateway_downstream_calls_total{service=\"\(service)\",grpc_code=\"\(code)\"} \(count)\n"
            }
        }
        out += "# HELP gateway_partial_parts_total Parts left out of aggregated answers (slow, failed or not deployed).\n"
        out += "# TYPE gateway_partial_parts_total counter\n"
        for (part, count) in state.partialAnswers.sorted(by: { $0.key < $1.key }) {
            out += "gateway_partial_parts_total{part=\"\(part)\"} \(count)\n"
        }
        out += "# HELP gateway_session_check_unavailable_total Calls refused with UNAVAILABLE because the set of ended sessions was stale.\n"
        out += "# TYPE gateway_session_check_unavailable_total counter\n"
        out += "gateway_session_check_unavailable_total \(state.revocationUnavailable)\n"
        return out
    }
}
