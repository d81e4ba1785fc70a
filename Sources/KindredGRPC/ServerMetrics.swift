import CoreMetrics
import NIOConcurrencyHelpers
import NIOCore
import Prometheus

// Prometheus has types of the same names; the runtime records through swift-metrics only.
private typealias Counter = CoreMetrics.Counter

/// The metrics of one server: the runtime's counters (connections, calls, abuse, time limits) recorded through
/// swift-metrics, and the backend every other part of the server records into (``factory``).
///
/// Backend: each server gets its own `PrometheusMetricsFactory` over a private `PrometheusCollectorRegistry`
/// (``registry``), which the admin port renders on `/metrics` — several servers in one process (tests) never
/// share a counter. A process that called `MetricsSystem.bootstrap(_:)` with another backend (StatsD, OTel...)
/// before building its servers gets that backend instead: ``registry`` is then nil and `/metrics` shows only
/// what is not recorded through swift-metrics.
///
/// Beside the backend the class keeps exact tallies under one lock, for in-process queries (``activeCalls``,
/// ``openConnections``, ``finishedCalls(path:code:)``, the abuse counters) whatever the backend. The handles of a
/// method are made on its first call and cached; later calls cost one locked dictionary hit.
public final class ServerMetrics: Sendable {
    /// Limits on time that close a connection or reset a stream (see `GRPCServerConfiguration`).
    enum Timeout: String, CaseIterable, CustomStringConvertible {
        case handshake = "handshake"
        case firstRequest = "first_request"
        case requestBody = "request_body"
        case writeStall = "write_stall"
        var description: String { self.rawValue }
    }

    /// Reasons a connection is closed for abuse (`grpc_server_abusive_connections_total{reason}`).
    static let abuseReasons = ["flood", "too_many_glitches", "too_many_pings"]

    /// The handles and tallies of one method.
    private struct Method {
        var byCode = [Int](repeating: 0, count: 17)
        var handled = [Counter?](repeating: nil, count: 17)
        let duration: Timer
    }

    private struct State {
        var connectionsOpen = 0
        var connectionsRefused = 0
        var abusive: [String: Int] = [:]
        var callsActive = 0
        var methods: [String: Method] = [:]
    }

    /// The backend the server's metrics go to (this class's, and the services', pools' and relays').
    public let factory: any MetricsFactory
    /// The server's own Prometheus registry, rendered by the admin port; nil when `MetricsSystem` was
    /// bootstrapped with another backend.
    public let registry: PrometheusCollectorRegistry?

    private let state = NIOLockedValueBox(State())
    private let samplers = NIOLockedValueBox([@Sendable () -> Void]())
    private let connectionsOpen: Meter
    private let connectionsTotal: Counter
    private let connectionsRefusedTotal: Counter
    private let connectionsTarpittedTotal: Counter
    private let abusiveTotal: [String: Counter]
    private let timeoutsTotal: [Timeout: Counter]
    private let callsActive: Meter

    /// A server's metrics on a backend:
    /// - `factory` given: that backend (`registry`, if given too, is what ``prometheusText()`` renders);
    /// - else `registry` given: a `PrometheusMetricsFactory` over it;
    /// - else the process's bootstrapped `MetricsSystem` if any, else a new private Prometheus registry.
    public init(factory: (any MetricsFactory)? = nil, registry: PrometheusCollectorRegistry? = nil) {
        if let factory {
            self.factory = factory
            self.registry = registry
        } else if let registry {
            self.factory = PrometheusMetricsFactory(registry: registry)
            self.registry = registry
        } else if !(MetricsSystem.factory is NOOPMetricsHandler) {
            self.factory = MetricsSystem.factory
            self.registry = nil
        } else {
            let registry = PrometheusCollectorRegistry()
            self.factory = PrometheusMetricsFactory(registry: registry)
            self.registry = registry
        }
        let factory = self.factory
        self.connectionsOpen = Meter(label: "grpc_server_connections_open", factory: factory)
        self.connectionsTotal = Counter(label: "grpc_server_connections_total", factory: factory)
        self.connectionsRefusedTotal = Counter(label: "grpc_server_connections_refused_total", factory: factory)
        self.connectionsTarpittedTotal = Counter(label: "grpc_server_connections_tarpitted_total", factory: factory)
        self.abusiveTotal = Dictionary(
            uniqueKeysWithValues: Self.abuseReasons.map {
                ($0, Counter(label: "grpc_server_abusive_connections_total", dimensions: [("reason", $0)], factory: factory))
            }
        )
        self.timeoutsTotal = Dictionary(
            uniqueKeysWithValues: Timeout.allCases.map {
                ($0, Counter(label: "grpc_server_timeouts_total", dimensions: [("timeout", $0.rawValue)], factory: factory))
            }
        )
        self.callsActive = Meter(label: "grpc_server_calls_active", factory: factory)
        // Prometheus shows a meter only once it has a value.
        self.connectionsOpen.set(0)
        self.callsActive.set(0)
    }

    // MARK: Runtime events

    func connectionOpened() {
        self.state.withLockedValue { $0.connectionsOpen += 1 }
        self.connectionsOpen.increment()
        self.connectionsTotal.increment()
    }

    func connectionClosed() {
        self.state.withLockedValue { $0.connectionsOpen -= 1 }
        self.connectionsOpen.decrement()
    }

    /// A new connection refused because its address is penalised for abuse.
    func connectionRefused() {
        self.state.withLockedValue { $0.connectionsRefused += 1 }
        self.connectionsRefusedTotal.increment()
    }

    /// A new connection from a penalised address held in the tarpit until its penalty ends.
    func connectionTarpitted() {
        self.connectionsTarpittedTotal.increment()
    }

    /// A connection closed for abuse (`too_many_glitches`, `too_many_pings`, `flood`).
    func connectionAbusive(reason: String) {
        self.state.withLockedValue { $0.abusive[reason, default: 0] += 1 }
        (self.abusiveTotal[reason]
            ?? Counter(label: "grpc_server_abusive_connections_total", dimensions: [("reason", reason)], factory: self.factory))
            .increment()
    }

    func timedOut(_ kind: Timeout) {
        self.timeoutsTotal[kind]?.increment()
    }

    func callStarted() {
        self.state.withLockedValue { $0.callsActive += 1 }
        self.callsActive.increment()
    }

    func callFinished(path: String, code: StatusCode, start: NIODeadline?) {
        let (counter, timer) = self.state.withLockedValue { state -> (Counter, Timer) in
            if start != nil { state.callsActive -= 1 }
            return state.methods.withValue(for: path, make: { self.makeMethod(path) }) { method in
                method.byCode[code.rawValue] += 1
                if let counter = method.handled[code.rawValue] { return (counter, method.duration) }
                let counter = Counter(
                    label: "grpc_server_handled_total",
                    dimensions: [("grpc_method", path), ("grpc_code", code.description)],
                    factory: self.factory
                )
                method.handled[code.rawValue] = counter
                return (counter, method.duration)
            }
        }
        counter.increment()
        if let start {
            self.callsActive.decrement()
            timer.recordNanoseconds((NIODeadline.now() - start).nanoseconds)
        }
    }

    private func makeMethod(_ path: String) -> Method {
        Method(duration: Timer(label: "grpc_server_handling_seconds", dimensions: [("grpc_method", path)], factory: self.factory))
    }

    // MARK: In-process queries

    /// Connections closed for abuse, by reason.
    public func abusiveConnections(reason: String) -> Int {
        self.state.withLockedValue { $0.abusive[reason] ?? 0 }
    }

    /// Connections refused by the abuse penalty.
    public var refusedConnections: Int { self.state.withLockedValue { $0.connectionsRefused } }

    /// Calls finished with `code` on `path` so far.
    public func finishedCalls(path: String, code: StatusCode) -> Int {
        self.state.withLockedValue { $0.methods[path]?.byCode[code.rawValue] ?? 0 }
    }

    /// Calls whose status has not been sent yet.
    public var activeCalls: Int { self.state.withLockedValue { $0.callsActive } }
    /// Open connections.
    public var openConnections: Int { self.state.withLockedValue { $0.connectionsOpen } }

    // MARK: Sampled values and rendering

    /// Adds a closure that copies a snapshot (pool statistics, a feed's state) into gauges. Samplers run before
    /// every rendering of ``registry`` (so a scrape sees current values) and, for other backends, from the
    /// runner's `metrics-sampler` loop.
    public func addSampler(_ sampler: @escaping @Sendable () -> Void) {
        self.samplers.withLockedValue { $0.append(sampler) }
    }

    /// Runs every sampler once.
    public func sample() {
        for sampler in self.samplers.withLockedValue({ $0 }) { sampler() }
    }

    /// Whether there are samplers to run.
    public var hasSamplers: Bool { !self.samplers.withLockedValue { $0.isEmpty } }

    /// The registry in the Prometheus text format, after running the samplers ("" without a registry).
    public func prometheusText() -> String {
        guard let registry = self.registry else { return "" }
        self.sample()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(4096)
        registry.emit(into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension Dictionary {
    /// Runs `body` on the value for `key`, inserting `make()` first when there is none (one hash lookup on a hit).
    fileprivate mutating func withValue<R>(for key: Key, make: () -> Value, _ body: (inout Value) -> R) -> R {
        body(&self[key, default: make()])
    }
}
