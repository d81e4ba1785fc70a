import Logging
import NIOConcurrencyHelpers
import NIOCore
import Synchronization

/// The calls of a client whose target has several replicas: a `ConnectionPool` per replica, calls balanced over
/// the replicas that are up, and retried on another when they failed in a way that makes it safe.
///
/// - Balance: pick-two-least-loaded: two replicas drawn at random among those up, the call goes to the one with
///   fewer calls in flight (unary and streaming, counted here). When none is up (a stale view), all are drawn.
/// - Health: a replica goes out when a connection to it cannot be opened or stops taking calls (GOAWAY, closed),
///   and when grpc.health.v1 Check (asked every `healthCheckInterval`, and at once after such trouble) does not
///   answer SERVING; it comes back when Check answers SERVING. Its reconnect backoff is capped at that interval.
/// - Draining: a replica that sent GOAWAY takes no new call (its pool opens no stream on that connection, and
///   the replica is out until Check answers again); calls in flight there run to their end.
/// - Retry, at most 3 attempts, each on a replica not tried yet, while the deadline allows: any call that failed
///   before the server could have acted on it — no connection could be had (refused, reset, in backoff), its
///   stream was refused (REFUSED_STREAM, or above a GOAWAY's last stream id); and an idempotent call
///   (`CallOptions.idempotent`) also when its connection broke mid-call or a shutting-down server failed it
///   with UNAVAILABLE. A streaming call is retried only while it could not be opened.
/// - DNS: a target given as one name that resolves to several addresses has a replica per address, and the
///   name is resolved again every `resolveInterval` (new addresses join, gone ones are closed once idle).
final class ReplicaBalancer: Sendable {
    /// One replica: its connections, its load and whether it takes calls.
    final class Replica: Sendable {
        let endpoint: GRPCEndpoint
        let pool: ConnectionPool
        let metrics: ReplicaMetrics
        /// Calls in flight here: what pick-two compares.
        let inFlight = Atomic<Int>(0)
        /// Takes new calls: false after trouble or a failed health check, until Check answers SERVING.
        let up = Atomic<Bool>(true)

        init(endpoint: GRPCEndpoint, pool: ConnectionPool, metrics: ReplicaMetrics) {
            self.endpoint = endpoint
            self.pool = pool
            self.metrics = metrics
        }

        func callStarted() {
            self.inFlight.add(1, ordering: .relaxed)
            self.metrics.calls.increment()
        }

        func callEnded() {
            self.inFlight.subtract(1, ordering: .relaxed)
        }

        /// Records the replica's health; true when it changed.
        @discardableResult
        func setUp(_ up: Bool) -> Bool {
            let changed = self.up.exchange(up, ordering: .relaxed) != up
            if changed { self.metrics.up.record(up ? 1 : 0) }
            return changed
        }
    }

    static let maxAttempts = 3
    private static let healthPath = "/grpc.health.v1.Health/Check"

    private let configuration: GRPCClientConfiguration
    private let group: any EventLoopGroup
    private let logger: Logger
    /// The name the replicas were resolved from, when the target was one DNS name.
    private let resolvedName: String?
    private let replicas: NIOLockedValueBox<[Replica]>
    private let watcher = NIOLockedValueBox<Task<Void, Never>?>(nil)
    private let closed = Atomic<Bool>(false)

    /// A balancer when the configuration names several replicas, or one DNS name that resolves to several
    /// addresses; nil for a single address (the client then uses one pool, as it always did).
    static func make(configuration: GRPCClientConfiguration, group: any EventLoopGroup, logger: Logger) -> ReplicaBalancer? {
        if configuration.replicas.count > 1 {
            return ReplicaBalancer(
                configuration: configuration, endpoints: configuration.replicas, resolvedName: nil, group: group,
                logger: logger)
        }
        guard configuration.replicas.count <= 1, !DNSAddresses.isLiteral(configuration.host) else { return nil }
        let addresses = DNSAddresses.resolve(configuration.host)
        guard addresses.count > 1 else { return nil }
        return ReplicaBalancer(
            configuration: configuration,
            endpoints: addresses.map { GRPCEndpoint(host: $0, port: configuration.port) },
            resolvedName: configuration.host, group: group, logger: logger)
    }

    private init(
        configuration: GRPCClientConfiguration,
        endpoints: [GRPCEndpoint],
        resolvedName: String?,
        group: any EventLoopGroup,
        logger: Logger
    ) {
        self.configuration = configuration
        self.group = group
        self.logger = logger
        self.resolvedName = resolvedName
        self.replicas = NIOLockedValueBox([])
        self.replicas.withLockedValue { $0 = endpoints.map(self.makeReplica) }
        let task = Task { [weak self] in
            var lastResolve = ContinuousClock.now
            while !Task.isCancelled {
                guard let interval = await self?.checkAll() else { return }
                if let self, self.resolvedName != nil, ContinuousClock.now - lastResolve >= self.configuration.resolveInterval {
                    lastResolve = ContinuousClock.now
                    self.resolveAgain()
                }
                try? await Task.sleep(for: interval)
            }
        }
        self.watcher.withLockedValue { $0 = task }
    }

    private func makeReplica(_ endpoint: GRPCEndpoint) -> Replica {
        var configuration = self.configuration
        configuration.replicas = []
        configuration.host = endpoint.host
        configuration.port = endpoint.port
        // A replica out of rotation takes no calls, so its reconnects are the health checks': backing off for
        // minutes would keep a restarted replica out long after it serves again.
        configuration.backoff.maximum = min(configuration.backoff.maximum, configuration.healthCheckInterval)
        configuration.backoff.initial = min(configuration.backoff.initial, configuration.backoff.maximum)
        if let resolvedName {
            // Addresses of one name: the name stays the :authority and the certificate's name.
            configuration.tlsServerName = self.configuration.tlsServerName ?? resolvedName
        } else if self.configuration.authority == "\(self.configuration.host):\(self.configuration.port)" {
            configuration.authority = endpoint.description
        }
        let metrics = ReplicaMetrics(
            target: self.configuration.authority, replica: endpoint.description,
            factory: self.configuration.metricsFactory)
        let box = NIOLockedValueBox<Replica?>(nil)
        let pool = ConnectionPool(configuration: configuration, group: self.group, logger: self.logger) { [weak self] in
            guard let self, let replica = box.withLockedValue({ $0 }) else { return }
            self.trouble(replica)
        }
        let replica = Replica(endpoint: endpoint, pool: pool, metrics: metrics)
        box.withLockedValue { $0 = replica }
        return replica
    }

    var states: [(endpoint: GRPCEndpoint, up: Bool)] {
        self.replicas.withLockedValue { $0 }.map { ($0.endpoint, $0.up.load(ordering: .relaxed)) }
    }

    // MARK: Calls

    func unary(
        path: String,
        metadata: Metadata,
        deadline: NIODeadline?,
        request: ByteBuffer,
        idempotent: Bool
    ) async throws -> ClientCall.UnaryOutcome {
        let replicas = self.replicas.withLockedValue { $0 }
        var tried: [Replica] = []
        var last: Result<ClientCall.UnaryOutcome, RPCError> = .failure(self.noReplica())
        while tried.count < Self.maxAttempts, let replica = Self.pick(replicas, excluding: tried) {
            tried.append(replica)
            replica.callStarted()
            let result: Result<ClientCall.UnaryOutcome, RPCError>
            do {
                result = .success(
                    try await replica.pool.unary(path: path, metadata: metadata, deadline: deadline, request: request))
            } catch let error as RPCError {
                result = .failure(error)
            } catch {
                replica.callEnded()
                throw error
            }
            replica.callEnded()
            last = result
            let retry: ClientCall.Retry
            switch result {
            case .success(let outcome): retry = outcome.retry
            // The pool throws UNAVAILABLE only when it had no connection to send on.
            case .failure(let error): retry = error.code == .unavailable ? .unprocessed : .no
            }
            guard retry == .unprocessed || (retry == .interrupted && idempotent), self.mayRetry(deadline) else { break }
            replica.metrics.retried(retry)
        }
        return try last.get()
    }

    /// Opens a streaming call's stream on a replica; the caller calls `callEnded()` on it when the call is over.
    func startCall(path: String, metadata: Metadata, deadline: NIODeadline?) async throws -> (ClientCall, Replica) {
        let replicas = self.replicas.withLockedValue { $0 }
        var tried: [Replica] = []
        var lastError = self.noReplica()
        while tried.count < Self.maxAttempts, let replica = Self.pick(replicas, excluding: tried) {
            tried.append(replica)
            replica.callStarted()
            do {
                return (try await replica.pool.startCall(path: path, metadata: metadata, deadline: deadline), replica)
            } catch let error as RPCError where error.code == .unavailable {
                replica.callEnded()
                lastError = error
                guard self.mayRetry(deadline) else { break }
                replica.metrics.retried(.unprocessed)
            } catch {
                replica.callEnded()
                throw error
            }
        }
        throw lastError
    }

    private func mayRetry(_ deadline: NIODeadline?) -> Bool {
        !Task.isCancelled && !self.closed.load(ordering: .relaxed) && (deadline.map { $0 > .now() } ?? true)
    }

    private func noReplica() -> RPCError {
        RPCError(.unavailable, "No replica of \(self.configuration.authority) is available")
    }

    /// Pick-two-least-loaded among the replicas that are up and not tried yet (among all not tried when none of
    /// them is up); nil when every replica was tried.
    static func pick(_ replicas: [Replica], excluding tried: [Replica]) -> Replica? {
        let untried = replicas.filter { replica in !tried.contains { $0 === replica } }
        let up = untried.filter { $0.up.load(ordering: .relaxed) }
        let candidates = up.isEmpty ? untried : up
        guard let index = Self.pickTwo(loads: candidates.map { $0.inFlight.load(ordering: .relaxed) }) else { return nil }
        return candidates[index]
    }

    /// Of two distinct entries drawn at random, the index of the one with the smaller load (the first on a tie).
    static func pickTwo(loads: [Int]) -> Int? {
        guard loads.count > 1 else { return loads.isEmpty ? nil : 0 }
        let first = Int.random(in: 0..<loads.count)
        var second = Int.random(in: 0..<(loads.count - 1))
        if second >= first { second += 1 }
        return loads[second] < loads[first] ? second : first
    }

    // MARK: Health

    /// A replica's connection failed or stopped taking calls: out now, and asked at once whether it is back.
    private func trouble(_ replica: Replica) {
        guard !self.closed.load(ordering: .relaxed), replica.setUp(false) else { return }
        self.logger.info(
            "Replica out of rotation", metadata: ["peer": "\(self.configuration.authority)", "replica": "\(replica.endpoint)"])
        Task { [weak self] in await self?.check(replica) }
    }

    /// Asks every replica's health; returns the pause before the next round (nil once closed).
    private func checkAll() async -> Duration? {
        guard !self.closed.load(ordering: .relaxed) else { return nil }
        let replicas = self.replicas.withLockedValue { $0 }
        await withTaskGroup(of: Void.self) { group in
            for replica in replicas { group.addTask { await self.check(replica) } }
        }
        return self.configuration.healthCheckInterval
    }

    private func check(_ replica: Replica) async {
        // As long as a connection may take to open: a loaded machine answering late is not a replica that is down.
        let timeout = max(self.configuration.healthCheckInterval, self.configuration.connectTimeout)
        let deadline = NIODeadline.now() + TimeAmount(timeout)
        var request = ByteBuffer()
        request.writeBytes([0, 0, 0, 0, 0])  // an empty HealthCheckRequest (service ""), framed
        let serving: Bool
        do {
            let outcome = try await replica.pool.unary(
                path: Self.healthPath, metadata: [:], deadline: deadline, request: request)
            serving = outcome.status.code == .ok && Self.isServing(outcome.message)
        } catch {
            serving = false
        }
        guard !self.closed.load(ordering: .relaxed), replica.setUp(serving) else { return }
        self.logger.info(
            serving ? "Replica back in rotation" : "Replica out of rotation",
            metadata: ["peer": "\(self.configuration.authority)", "replica": "\(replica.endpoint)"])
    }

    /// Whether a grpc.health.v1 HealthCheckResponse says SERVING (field 1, a varint, value 1). Decoded here:
    /// the runtime does not depend on the generated messages.
    static func isServing(_ message: ByteBuffer?) -> Bool {
        guard let message else { return false }
        var status: UInt64 = 0
        var bytes = message.readableBytesView[...]
        func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while let byte = bytes.popFirst() {
                value |= UInt64(byte & 0x7f) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
                if shift > 63 { return nil }
            }
            return nil
        }
        while !bytes.isEmpty {
            guard let key = varint() else { return false }
            switch key & 7 {
            case 0:
                guard let value = varint() else { return false }
                if key >> 3 == 1 { status = value }
            case 2:
                guard let length = varint(), length <= bytes.count else { return false }
                bytes = bytes.dropFirst(Int(length))
            default:
                return false
            }
        }
        return status == 1
    }

    // MARK: DNS

    /// Resolves the target's name again: new addresses become replicas, replicas whose address went are closed
    /// once their calls are done.
    private func resolveAgain() {
        guard let name = self.resolvedName else { return }
        let addresses = DNSAddresses.resolve(name)
        guard !addresses.isEmpty else { return }  // a failed lookup changes nothing
        let endpoints = addresses.map { GRPCEndpoint(host: $0, port: self.configuration.port) }
        let gone: [Replica] = self.replicas.withLockedValue { replicas in
            let gone = replicas.filter { !endpoints.contains($0.endpoint) }
            let kept = replicas.filter { endpoints.contains($0.endpoint) }
            let added = endpoints.filter { endpoint in !kept.contains { $0.endpoint == endpoint } }.map(self.makeReplica)
            replicas = kept + added
            return gone
        }
        for replica in gone { Task { await replica.pool.close() } }
    }

    func close() async {
        self.closed.store(true, ordering: .relaxed)
        self.watcher.withLockedValue { $0 }?.cancel()
        for replica in self.replicas.withLockedValue({ $0 }) { await replica.pool.close() }
    }
}
