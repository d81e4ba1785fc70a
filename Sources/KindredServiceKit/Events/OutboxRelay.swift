import CoreMetrics
import Foundation
import KindredGRPC
import KindredIdentity
import KindredPostgres
import KindredProto
import KindredProtobuf
import Logging
import NIOCore
import Synchronization

/// Delivers a producer's `events_outbox` to each configured consumer's `DeliverEvents`, as the protocol in
/// proto/kindred/common/v1/events.proto requires: at least once, in order per partition, batches of 1...100,
/// backoff with jitter while a consumer fails, never dropping an event (a consumer that is not deployed
/// leaves its events pending, visible in ``metrics``).
///
/// Generalised from auth's mail relay: work is claimed in the database (``OutboxRelayStore/claim``), so any
/// number of replicas share it; each consumer has its own loops (`loopsPerConsumer`, each claiming partitions
/// of its own), woken by the producers' NOTIFY (one loop per consumer: ``RelayWakeups``; delivery starts within
/// milliseconds of a commit), by a poll every
/// `pollInterval` (retries after backoff, missed notifications) and by its own progress (a full batch is followed
/// at once by the next). The decisions
/// (what goes in a batch, where each cursor moves) are ``DeliveryPlan``'s; this type does the I/O.
///
/// Run it with ``run()`` until the task is cancelled; it then ends its leases so another replica can continue
/// at once. A relay that dies instead leaves its partitions to others after `lease`.
public final class OutboxRelay: Sendable {
    public let configuration: OutboxRelayConfiguration
    public let metrics: EventRelayMetrics
    private let database: PostgresClient
    let store: OutboxRelayStore
    private let tokens: ServiceTokenSource?
    private let clients: [String: GRPCClient]
    /// The JetStream bus it publishes on instead of calling consumers; nil for the PostgreSQL push relay.
    public let bus: JetStreamEventBus?
    let logger: Logger
    /// Answers whose record failed (PostgreSQL unreachable then), recorded by the consumer's next pass while their
    /// leases last (``recordLeftAnswers(of:)``).
    private let unrecorded = Mutex<[UnrecordedAnswer]>([])

    public convenience init(
        configuration: OutboxRelayConfiguration,
        database: PostgresClient,
        tokens: ServiceTokenSource,
        metricsFactory: any MetricsFactory = NOOPMetricsHandler.instance,
        logger: Logger
    ) {
        self.init(
            configuration: configuration, bus: nil, tokens: tokens, database: database, metricsFactory: metricsFactory,
            logger: logger)
    }

    /// A relay that publishes `configuration.producer`'s outbox on `bus` (its consumers are replaced by the bus's
    /// pseudo-consumer ``JetStreamEventBus/relayConsumer``) and serves that producer's waits for consumers.
    public convenience init(
        configuration: OutboxRelayConfiguration,
        bus: JetStreamEventBus,
        database: PostgresClient,
        metricsFactory: any MetricsFactory = NOOPMetricsHandler.instance,
        logger: Logger
    ) {
        var configuration = configuration
        configuration.consumers = [EventConsumer(name: JetStreamEventBus.relayConsumer, host: "nats", port: 4222)]
        self.init(
            configuration: configuration, bus: bus, tokens: nil, database: database, metricsFactory: metricsFactory,
            logger: logger)
        JetStreamEventBus.register(bus, producer: configuration.producer)
    }

    private init(
        configuration: OutboxRelayConfiguration,
        bus: JetStreamEventBus?,
        tokens: ServiceTokenSource?,
        database: PostgresClient,
        metricsFactory: any MetricsFactory,
        logger: Logger
    ) {
        precondition(configuration.lease > configuration.callTimeout, "the lease must outlast a call")
        precondition((1...DeliveryPlan.maxBatch).contains(configuration.maxBatch), "maxBatch must be 1...100")
        precondition((1...16).contains(configuration.loopsPerConsumer), "loopsPerConsumer must be 1...16")
        self.configuration = configuration
        self.database = database
        self.tokens = tokens
        self.bus = bus
        self.logger = logger
        self.metrics = EventRelayMetrics(
            producer: configuration.producer,
            consumers: configuration.consumers.map(\.name),
            factory: metricsFactory
        )
        let owner = "\(ProcessInfo.processInfo.hostName)/\(getpid())/\(UInt32.random(in: 0...UInt32.max))"
        self.store = OutboxRelayStore(
            database: database, owner: owner,
            typeNames: configuration.consumers.reduce(into: [:]) { names, consumer in
                names[consumer.name] = configuration.types(of: consumer)?.map(\.rawValue).sorted()
            })
        var clients: [String: GRPCClient] = [:]
        for consumer in configuration.consumers where bus == nil {
            var client = GRPCClientConfiguration(address: consumer.address)
            client.metricsFactory = metricsFactory
            client.connectionCount = 1
            client.defaultTimeout = configuration.callTimeout
            client.connectTimeout = min(configuration.callTimeout, .seconds(5))
            clients[consumer.name] = GRPCClient(configuration: client, logger: logger)
        }
        self.clients = clients
    }

    /// Delivers until the task is cancelled, then ends its leases and closes its connections.
    public func run() async {
        guard !self.configuration.consumers.isEmpty else { return }
        if let bus = self.bus { await self.prepare(bus) }
        await self.untilDone("events relay cannot register its consumers yet", errorType: true) {
            try await self.registerConsumers()
        }
        if self.bus != nil {
            await self.untilDone("events relay cannot check its stream yet") { try await self.checkStream() }
        }
        let loops = self.configuration.consumers.flatMap { consumer in
            Array(repeating: consumer, count: self.configuration.loopsPerConsumer)
        }
        let wakeups = RelayWakeups(
            consumers: self.configuration.consumers.count, loopsPerConsumer: self.configuration.loopsPerConsumer)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.listen(wakeups) }
            group.addTask { await self.tick { wakeups.wakeAll() } }
            for (index, consumer) in loops.enumerated() {
                group.addTask { await self.deliverLoop(to: consumer, index: index, wakeups: wakeups) }
            }
            wakeups.wakeAll()
            await withTaskCancellationHandler {
                await group.next()
            } onCancel: {
                wakeups.finish()
            }
            group.cancelAll()
        }
        // Not in the cancelled task: its queries would be cancelled too.
        await Task { [store, logger] in
            do { try await store.releaseLeases() } catch {
                logger.warning(
                    "events relay could not release its leases",
                    metadata: ["error.type": "\(type(of: error))"]
                )
            }
        }.value
        for client in self.clients.values { await client.close() }
        await self.bus?.close()
    }

    /// Connects to the bus and creates the producer's stream, retrying until done.
    private func prepare(_ bus: JetStreamEventBus) async {
        await bus.connected()
        await self.untilDone("events relay cannot create its stream yet") {
            try await bus.ensureStream(producer: self.configuration.producer)
        }
    }

    /// Delivers one batch to `consumer`: claims partitions, sends their next events, records the answer.
    /// Returns the number of events acknowledged (0 when nothing was due); throws when the call failed.
    @discardableResult
    public func deliverOnce(to consumer: EventConsumer) async throws -> Int {
        try await self.deliverPass(to: consumer).delivered
    }

    /// What one pass of a delivery loop did: the events acknowledged, and whether more may be due now (the claim or
    /// the read reached its limit, or a partition it recorded has events appended meanwhile). A pass that says no
    /// ends the loop's run until the next wake-up: an append after it sends a NOTIFY of its own.
    struct Pass {
        var delivered: Int
        var more: Bool
    }

    func deliverPass(to consumer: EventConsumer) async throws -> Pass {
        let configuration = self.configuration
        try await self.recordLeftAnswers(of: consumer.name)
        // The claim's leases end no earlier than this: the database stamps them after this moment.
        let leaseEnds = ContinuousClock.now + configuration.lease
        let claimed = try await self.store.claim(
            consumer: consumer.name,
            limit: configuration.partitionsPerClaim,
            lease: configuration.lease
        )
        guard !claimed.isEmpty else { return Pass(delivered: 0, more: false) }
        let plan: DeliveryPlan
        let cutShort: Bool
        do {
            let events = try await self.store.events(of: consumer.name, after: claimed, limit: configuration.maxBatch)
            cutShort = claimed.count >= configuration.partitionsPerClaim || events.count >= configuration.maxBatch
            plan = DeliveryPlan(
                claimed: claimed,
                events: events,
                readLimit: configuration.maxBatch,
                maxBatch: configuration.maxBatch
            )
        } catch {
            let untouched = UnrecordedAnswer(
                consumer: consumer.name,
                outcomes: Dictionary(uniqueKeysWithValues: claimed.map { ($0.partition, .untouched) }),
                delays: [:], error: nil, leaseEnds: leaseEnds)
            do { try await self.record(untouched) } catch { self.unrecorded.withLock { $0.append(untouched) } }
            throw error
        }
        var outcomes: [String: DeliveryPlan.Outcome]
        var failure: (any Error)?
        if plan.batch.isEmpty {
            outcomes = plan.outcomes(acknowledgedIDs: [])
        } else {
            do {
                let acknowledged = try await self.send(plan.batch, to: consumer)
                outcomes = plan.outcomes(acknowledgedIDs: acknowledged)
            } catch {
                if Task.isCancelled { throw error }  // shutting down: the leases are released by run()
                failure = error
                outcomes = plan.outcomesOfFailedCall()
            }
        }
        var delays: [String: Duration] = [:]
        var delivered = 0
        var partitionFailed = false
        let attempts = Dictionary(uniqueKeysWithValues: claimed.map { ($0.partition, $0.attempts) })
        for (partition, outcome) in outcomes {
            switch outcome {
            case .delivered(_, let count): delivered += count
            case .failed(_, let count):
                delivered += count
                partitionFailed = true
                delays[partition] = configuration.backoff.delay(afterFailures: (attempts[partition] ?? 0) + 1)
            case .untouched, .nothingPending: break
            }
        }
        let answer = UnrecordedAnswer(
            consumer: consumer.name, outcomes: outcomes, delays: delays,
            error: failure.map { Self.describe($0) } ?? (partitionFailed ? "not acknowledged" : nil),
            leaseEnds: leaseEnds)
        // The consumer's answer is worth a few tries now, and more at the consumer's next passes: lost, it would
        // cost a redelivery, and its leases would hold the partitions back until they end.
        var stillPending = false
        for attempt in 1...3 {
            do {
                stillPending = try await self.record(answer)
                break
            } catch where attempt < 3 && !Task.isCancelled {
                try await Task.sleep(for: .milliseconds(100 * attempt))
            } catch {
                self.unrecorded.withLock { $0.append(answer) }
                throw error
            }
        }
        // A partition that had failed was delivered: the consumer answers again. Its other partitions waiting out
        // a backoff (up to `backoff.maximum` after it came back) are tried at the next pass instead.
        let recovered = claimed.contains { claim in
            guard claim.attempts > 0, case .delivered? = outcomes[claim.partition] else { return false }
            return true
        }
        if recovered {
            do { try await self.store.retryFailedNow(consumer: consumer.name) } catch {
                self.logger.debug("events relay could not end its backoffs", metadata: ["error": "\(error)"])
            }
        }
        if delivered > 0 { self.metrics.recordDelivered(consumer.name, count: delivered) }
        // A consumer that stays down (or is not deployed yet) would log at every retry: warn when a partition
        // starts failing, then only at debug level; the failures counter shows the rest.
        let level: Logger.Level = claimed.contains { $0.attempts == 0 } ? .warning : .debug
        if let failure {
            self.metrics.recordFailure(consumer.name)
            self.logger.log(
                level: level,
                "event delivery failed, will retry",
                metadata: [
                    "events.consumer": "\(consumer.name)", "events.batch": "\(plan.batch.count)",
                    "error": "\(Self.describe(failure))",
                ]
            )
            throw failure
        }
        if partitionFailed {
            self.metrics.recordFailure(consumer.name)
            self.logger.log(
                level: level,
                "consumer left events unacknowledged, will retry",
                metadata: ["events.consumer": "\(consumer.name)", "events.acknowledged": "\(delivered)"]
            )
        }
        return Pass(delivered: delivered, more: cutShort || stillPending)
    }

    /// Records `answer` and tells the calls of this process waiting for its partitions (`Outbox.awaitDelivery`) to
    /// look again. True when a partition it recorded still has events pending.
    @discardableResult
    private func record(_ answer: UnrecordedAnswer) async throws -> Bool {
        let stillPending = try await self.store.record(
            consumer: answer.consumer, outcomes: answer.outcomes, delays: answer.delays, error: answer.error)
        DeliveryNotices.of(producer: self.configuration.producer).answered(partitions: answer.outcomes.keys)
        return stillPending
    }

    /// Records the answers to `consumer` whose record failed, before the consumer's next claim. Without it, a
    /// record lost to a PostgreSQL restart leaves its leases behind: the claim skips those partitions until
    /// `lease` ends (30 s), though the relay that holds them is alive, and a swipe's match waiting for chat times
    /// out. An answer whose lease is about to end (less than `callTimeout` left) is dropped instead: once it
    /// ends, another loop may claim the partition, and recording the old answer would end that loop's lease
    /// (the events are then delivered again, which consumers' inboxes allow).
    private func recordLeftAnswers(of consumer: String) async throws {
        let stillLeased = ContinuousClock.now + self.configuration.callTimeout
        let left = self.unrecorded.withLock { answers in
            let left = answers.filter { $0.consumer == consumer }
            answers.removeAll { $0.consumer == consumer }
            return left.filter { $0.leaseEnds > stillLeased }
        }
        for (index, answer) in left.enumerated() {
            do {
                try await self.record(answer)
            } catch {
                self.unrecorded.withLock { $0.append(contentsOf: left[index...]) }
                throw error
            }
        }
    }

    /// Deletes delivered events older than `retention` (up to 1000 a call), with the bookkeeping of
    /// partitions they leave empty; ``run()`` calls it every 10 minutes. Returns how many events went.
    @discardableResult
    public func purgeDelivered() async throws -> Int {
        // On the bus only publication counts: the consumers registered for the push relay are not delivered to.
        try await self.store.purgeDelivered(
            retention: self.configuration.retention,
            consumers: self.bus == nil ? nil : [JetStreamEventBus.relayConsumer])
    }

    /// Recomputes the pending gauges of every consumer.
    public func refreshMetrics() async {
        for consumer in self.configuration.consumers {
            guard let pending = try? await self.store.pending(consumer: consumer.name) else { continue }
            self.metrics.setPending(consumer.name, count: pending.count, oldestSeconds: pending.oldestSeconds)
        }
    }

    /// Adds the configured consumers to `events_consumers` (``run()`` does it first). Events appended before a
    /// consumer is registered are not delivered to it: a producer's migration registers the consumers its
    /// contract names, so nothing written before the first relay ran is missed.
    public func registerConsumers() async throws {
        if self.bus != nil {
            try await self.store.registerPublisher(JetStreamEventBus.relayConsumer)
        } else {
            try await self.store.register(consumers: self.configuration.consumers.map(\.name))
        }
    }

    // MARK: Loops

    /// Runs `step` until it succeeds (PostgreSQL or NATS not answering yet) or the task is cancelled, 100 ms doubling
    /// to 5 s between tries, each failure logged as `problem` with the error (its type alone when `errorType`).
    private func untilDone(
        _ problem: Logger.Message, errorType: Bool = false, _ step: () async throws -> Void
    ) async {
        var delay: Duration = .milliseconds(100)
        while !Task.isCancelled {
            do {
                try await step()
                return
            } catch {
                let described: Logger.Metadata =
                    errorType ? ["error.type": "\(type(of: error))"] : ["error": "\(error)"]
                self.logger.warning(problem, metadata: described)
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(5))
            }
        }
    }

    private func deliverLoop(to consumer: EventConsumer, index: Int, wakeups: RelayWakeups) async {
        for await _ in wakeups.streams[index] {
            wakeups.setBusy(index, true)
            // Batch after batch while there is work; a failure waits for the next wake-up (its partitions
            // back off in the database meanwhile), and so does a pass that left nothing due (no claim that finds
            // nothing after every run of work).
            while !Task.isCancelled {
                guard let pass = try? await self.deliverPass(to: consumer), pass.delivered > 0, pass.more else { break }
            }
            wakeups.setBusy(index, false)
        }
    }

    /// LISTEN on the producer's channel; a notification wakes one loop per consumer (``RelayWakeups``). If the
    /// listening connection breaks, polling carries on alone until it is back.
    private func listen(_ wakeups: RelayWakeups) async {
        let channel = Outbox(producer: self.configuration.producer).channel
        while !Task.isCancelled {
            do {
                let notifications = try await self.database.listen(channel: channel)
                wakeups.wakeAll()  // whatever was committed while not listening
                for try await _ in notifications { wakeups.wakeOnePerConsumer() }
            } catch {
                if Task.isCancelled { return }
                self.logger.warning(
                    "events relay lost its LISTEN connection",
                    metadata: ["error.type": "\(type(of: error))"]
                )
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// Polls, refreshes the gauges and purges delivered events on their own schedules.
    private func tick(_ wakeAll: @escaping @Sendable () -> Void) async {
        let clock = ContinuousClock()
        var nextMetrics = clock.now
        var nextPurge = clock.now + .seconds(60)
        var nextStreamCheck = clock.now + self.configuration.streamCheckInterval
        while !Task.isCancelled {
            if self.bus != nil && clock.now >= nextStreamCheck {
                _ = try? await self.checkStream()
                nextStreamCheck = clock.now + self.configuration.streamCheckInterval
            }
            wakeAll()
            if clock.now >= nextMetrics {
                await self.refreshMetrics()
                nextMetrics = clock.now + self.configuration.metricsInterval
            }
            if clock.now >= nextPurge {
                _ = try? await self.purgeDelivered()
                nextPurge = clock.now + .seconds(600)
            }
            try? await Task.sleep(for: self.configuration.pollInterval)
        }
    }

    // MARK: The call

    /// Calls the consumer's DeliverEvents, or publishes on the bus; returns the acknowledged ids.
    private func send(_ batch: [OutboxEvent], to consumer: EventConsumer) async throws -> Set<String> {
        // The column is the truth: batch appends (`Outbox.appendQuery`) store payloads before sequences exist.
        let events = try batch.map {
            var event = try Kindred.Common.V1.Event(serializedBytes: $0.payload)
            event.sequence = $0.sequence
            return event
        }
        if let bus = self.bus { return await Self.publish(events, on: bus) }
        guard let client = self.clients[consumer.name], let tokens = self.tokens else { return [] }
        var request = DeliverEventsMethod.Request()
        request.events = events
        let metadata = try await tokens.metadata()
        do {
            let response = try await client.unary(
                DeliverEventsMethod.method(for: consumer),
                request,
                metadata: metadata,
                // Consumers apply each event once (their inbox): a batch cut mid-call may go to another replica.
                options: CallOptions(timeout: self.configuration.callTimeout, idempotent: true)
            )
            return Set(response.acknowledgedEventIds)
        } catch let status as RPCError where status.code == .unauthenticated {
            tokens.invalidate()  // the next attempt fetches a fresh token
            throw status
        }
    }

    /// Publishes each partition's events in order, one at a time (the next only after the stream acknowledged the
    /// previous one, so the stream holds them in order), the partitions side by side. A partition stops at its first
    /// failure; the ids the stream acknowledged are returned, and the plan sends the rest again.
    private static func publish(_ events: [Kindred.Common.V1.Event], on bus: JetStreamEventBus) async -> Set<String> {
        var partitions: [String: [Kindred.Common.V1.Event]] = [:]
        var order: [String] = []
        for event in events {
            if partitions[event.partitionKey] == nil { order.append(event.partitionKey) }
            partitions[event.partitionKey, default: []].append(event)
        }
        return await withTaskGroup(of: [String].self) { group in
            for key in order {
                let run = partitions[key]!
                group.addTask {
                    var published: [String] = []
                    for event in run {
                        guard (try? await bus.publish(event)) != nil else { break }
                        published.append(event.eventId)
                    }
                    return published
                }
            }
            var acknowledged = Set<String>()
            for await ids in group { acknowledged.formUnion(ids) }
            return acknowledged
        }
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? RPCError { return "\(error.code)" }
        return "\(type(of: error))"
    }
}

/// The consumers' DeliverEvents: every consumer's RPC takes `kindred.common.v1.DeliverEventsRequest` and answers
/// `kindred.common.v1.DeliverEventsResponse`, so one relay serves them all; only the path differs.
public enum DeliverEventsMethod {
    public typealias Request = Kindred.Common.V1.DeliverEventsRequest
    public typealias Response = Kindred.Common.V1.DeliverEventsResponse

    /// `/kindred.<consumer>.v1.<Consumer>Service/DeliverEvents`.
    public static func method(for consumer: EventConsumer) -> ProtoMethod<Request, Response> {
        ProtoMethod(service: consumer.grpcService, name: "DeliverEvents", kind: .unary)
    }
}

/// A consumer's answer to one batch (each claimed partition's outcome) not yet written to its cursors.
private struct UnrecordedAnswer: Sendable {
    let consumer: String
    let outcomes: [String: DeliveryPlan.Outcome]
    let delays: [String: Duration]
    let error: String?
    /// When the batch's leases end, by this process's clock.
    let leaseEnds: ContinuousClock.Instant
}
