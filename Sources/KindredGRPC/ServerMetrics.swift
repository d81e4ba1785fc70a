import NIOConcurrencyHelpers
import NIOCore

/// Counters of one server, rendered in the Prometheus text format by `prometheusText()`.
public final class ServerMetrics: Sendable {
    /// Per-method counters: calls by status code, and the summed duration of those that started.
    private struct MethodStats {
        var byCode = [Int](repeating: 0, count: 17)
        var durationSum: Double = 0
        var durationCount = 0

        mutating func record(code: StatusCode, seconds: Double?) {
            self.byCode[code.rawValue] += 1
            if let seconds {
                self.durationSum += seconds
                self.durationCount += 1
            }
        }
    }

    /// Limits on time that close a connection or reset a stream (see `GRPCServerConfiguration`).
    enum Timeout: String, CaseIterable, CustomStringConvertible {
        case handshake = "handshake"
        case firstRequest = "first_request"
        case requestBody = "request_body"
        case writeStall = "write_stall"
        var description: String { self.rawValue }
    }

    private struct State {
        var connectionsOpen = 0
        var connectionsTotal = 0
        var connectionsRefused = 0
        var connectionsTarpitted = 0
        var abusive: [String: Int] = [:]
        var timeouts: [String: Int] = [:]
        var callsActive = 0
        var methods: [String: MethodStats] = [:]
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

    /// A new connection refused because its address is penalised for abuse.
    func connectionRefused() {
        self.state.withLockedValue { $0.connectionsRefused += 1 }
    }

    /// A new connection from a penalised address held in the tarpit until its penalty ends.
    func connectionTarpitted() {
        self.state.withLockedValue { $0.connectionsTarpitted += 1 }
    }

    /// A connection closed for abuse (`too_many_glitches`, `too_many_pings`, `flood`).
    func connectionAbusive(reason: String) {
        self.state.withLockedValue { $0.abusive[reason, default: 0] += 1 }
    }

    func timedOut(_ kind: Timeout) {
        self.state.withLockedValue { $0.timeouts[kind.rawValue, default: 0] += 1 }
    }

    /// Connections closed for abuse, by reason.
    public func abusiveConnections(reason: String) -> Int {
        self.state.withLockedValue { $0.abusive[reason] ?? 0 }
    }

    /// Connections refused by the abuse penalty.
    public var refusedConnections: Int { self.state.withLockedValue { $0.connectionsRefused } }

    func callStarted() {
        self.state.withLockedValue { $0.callsActive += 1 }
    }

    func callFinished(path: String, code: StatusCode, start: NIODeadline?) {
        let seconds = start.map { Double((NIODeadline.now() - $0).nanoseconds) / 1e9 }
        self.state.withLockedValue { state in
            if start != nil { state.callsActive -= 1 }
            state.methods[path, default: MethodStats()].record(code: code, seconds: seconds)
        }
    }

    /// Calls finished with `code` on `path` so far.
    public func finishedCalls(path: String, code: StatusCode) -> Int {
        self.state.withLockedValue { $0.methods[path]?.byCode[code.rawValue] ?? 0 }
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
        out += "# HELP grpc_server_connections_refused_total Connections refused: the address is penalised for abuse.\n"
        out += "# TYPE grpc_server_connections_refused_total counter\n"
        out += "grpc_server_connections_refused_total \(state.connectionsRefused)\n"
        out += "# HELP grpc_server_connections_tarpitted_total Connections from penalised addresses held until the penalty ends.\n"
        out += "# TYPE grpc_server_connections_tarpitted_total counter\n"
        out += "grpc_server_connections_tarpitted_total \(state.connectionsTarpitted)\n"
        out += "# HELP grpc_server_abusive_connections_total Connections closed with ENHANCE_YOUR_CALM, by reason.\n"
        out += "# TYPE grpc_server_abusive_connections_total counter\n"
        for reason in ["flood", "too_many_glitches", "too_many_pings"] {
            out += "grpc_server_abusive_connections_total{reason=\"\(reason)\"} \(state.abusive[reason] ?? 0)\n"
        }
        out += "# HELP grpc_server_timeouts_total Connections closed or streams reset by a time limit, by limit.\n"
        out += "# TYPE grpc_server_timeouts_total counter\n"
        for kind in Timeout.allCases {
            out += "grpc_server_timeouts_total{timeout=\"\(kind.rawValue)\"} \(state.timeouts[kind.rawValue] ?? 0)\n"
        }
        out += "# HELP grpc_server_calls_active Calls in progress.\n# TYPE grpc_server_calls_active gauge\n"
        out += "grpc_server_calls_active \(state.callsActive)\n"
        out += "# HELP grpc_server_handled_total Calls finished, by method and status code.\n"
        out += "# TYPE grpc_server_handled_total counter\n"
        let methods = state.methods.sorted { $0.key < $1.key }
        for (path, stats) in methods {
            for (code, count) in stats.byCode.enumerated() where count > 0 {
                let name = StatusCode(rawValue: code)!.description
                out += "grpc_server_handled_total{grpc_method=\"\(path)\",grpc_code=\"\(name)\"} \(count)\n"
            }
        }
        out += "# HELP grpc_server_handling_seconds Time from request headers to status, by method.\n"
        out += "# TYPE grpc_server_handling_seconds summary\n"
        for (path, stats) in methods where stats.durationCount > 0 {
            out += "grpc_server_handling_seconds_sum{grpc_method=\"\(path)\"} \(stats.durationSum)\n"
            out += "grpc_server_handling_seconds_count{grpc_method=\"\(path)\"} \(stats.durationCount)\n"
        }
        return out
    }
}

