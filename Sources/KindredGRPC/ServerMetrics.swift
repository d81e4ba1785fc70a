import NIOConcurrencyHelpers
import NIOCore

/// Counters of one server, rendered in the Prometheus text format by `prometheusText()`.
public final class ServerMetrics: Sendable {
    private struct MethodKey: Hashable {
        let path: String
        let code: Int
    }

    private struct State {
        var connectionsOpen = 0
        var connectionsTotal = 0
        var callsActive = 0
        var calls: [MethodKey: Int] = [:]
        /// Sum of call durations per method, in seconds, and the count they cover.
        var durationSum: [String: Double] = [:]
        var durationCount: [String: Int] = [:]
    }

    private let state = NIOLockedValueBox(State())

    public init() {}

    func connectionOpened() {
        self.state.withLockedValue {
            $0.connectionsOpen += 1
            $0.connectionsTotal += 1
        }
    }

    func connectionClosed() {
        self.state.withLockedValue { $0.connectionsOpen -= 1 }
    }

    func callStarted() {
        self.state.withLockedValue { $0.callsActive += 1 }
    }

    func callFinished(path: String, code: StatusCode, start: NIODeadline?) {
        let seconds = start.map { Double((NIODeadline.now() - $0).nanoseconds) / 1e9 }
        self.state.withLockedValue { state in
            if start != nil { state.callsActive -= 1 }
            state.calls[MethodKey(path: path, code: code.rawValue), default: 0] += 1
            if let seconds {
                state.durationSum[path, default: 0] += seconds
                state.durationCount[path, default: 0] += 1
            }
        }
    }

    /// Calls finished with `code` on `path` so far.
    public func finishedCalls(path: String, code: StatusCode) -> Int {
        self.state.withLockedValue { $0.calls[MethodKey(path: path, code: code.rawValue)] ?? 0 }
    }

    /// Calls whose status has not been sent yet.
    public var activeCalls: Int { self.state.withLockedValue { $0.callsActive } }
    /// Open connections.
    public var openConnections: Int { self.state.withLockedValue { $0.connectionsOpen } }

    public func prometheusText() -> String {
        let state = self.state.withLockedValue { $0 }
        var out = ""
        out += "# HELP grpc_server_connections_open Open HTTP/2 connections.\n# TYPE grpc_server_connections_open gauge\n"
        out += "grpc_server_connections_open \(state.connectionsOpen)\n"
        out += "# HELP grpc_server_connections_total Accepted connections.\n# TYPE grpc_server_connections_total counter\n"
        out += "grpc_server_connections_total \(state.connectionsTotal)\n"
        out += "# HELP grpc_server_calls_active Calls in progress.\n# TYPE grpc_server_calls_active gauge\n"
        out += "grpc_server_calls_active \(state.callsActive)\n"
        out += "# HELP grpc_server_handled_total Calls finished, by method and status code.\n"
        out += "# TYPE grpc_server_handled_total counter\n"
        for (key, count) in state.calls.sorted(by: { ($0.key.path, $0.key.code) < ($1.key.path, $1.key.code) }) {
            let code = StatusCode(rawValue: key.code)?.description ?? String(key.code)
            out += "grpc_server_handled_total{grpc_method=\"\(key.path)\",grpc_code=\"\(code)\"} \(count)\n"
        }
        out += "# HELP grpc_server_handling_seconds Time from request headers to status, by method.\n"
        out += "# TYPE grpc_server_handling_seconds summary\n"
        for (path, sum) in state.durationSum.sorted(by: { $0.key < $1.key }) {
            out += "grpc_server_handling_seconds_sum{grpc_method=\"\(path)\"} \(sum)\n"
            out += "grpc_server_handling_seconds_count{grpc_method=\"\(path)\"} \(state.durationCount[path] ?? 0)\n"
        }
        return out
    }
}
