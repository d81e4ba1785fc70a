import CoreMetrics
import Foundation
import KindredPostgres
import KindredProto
import KindredServiceKit
import KindredTracing
import Logging
import Synchronization
import Tracing

/// Group commit of swipes: concurrent callers' swipes are collected and committed together, at most `maxBatch`
/// per transaction and `writers` transactions at once. A caller is answered only after the transaction holding
/// its swipe committed (`synchronous_commit` stays on: acknowledged swipes survive a crash).
///
/// No timer: a writer starts as soon as a swipe arrives and a writer slot is free (an idle service commits a
/// lone swipe at once); while the writers are busy, arriving swipes queue up and the next free writer takes
/// them all (up to `maxBatch`), so batches grow with the load. A batch is BEGIN + pair locks + one load statement,
/// the decisions (`SwipeBatch`, no I/O), then the swipes, matches, events and COMMIT (`SwipeStore`). While swipes
/// keep coming a writer keeps its connection and has two batches in flight: one round trip carries a batch's
/// writes and COMMIT and the next batch's BEGIN, locks and load (which runs after that COMMIT, so it sees it), so
/// a batch costs one round trip instead of two.
///
/// Traces: a batch's statements are spans of the first swipe's trace in it (the writer works for all of them at
/// once), and each swipe's events carry its own caller's trace.
public final class SwipeWriter: Sendable {
    private struct Pending {
        var command: SwipeCommand
        var continuation: CheckedContinuation<SwipeReply, any Error>
        /// The caller's trace context (nil while tracing is off).
        var trace: ServiceContext?
    }

    private struct State {
        var queue: [Pending] = []
        var running = 0
    }

    private let database: PostgresClient
    private let store: SwipeStore
    private let outbox: Outbox
    private let maxBatch: Int
    private let writers: Int
    private let logger: Logger
    private let state = Mutex(State())
    private let batchSize: Recorder
    private let commitTime: CoreMetrics.Timer
    private let batchFailures: Counter

    init(
        database: PostgresClient,
        store: SwipeStore,
        outbox: Outbox,
        maxBatch: Int,
        writers: Int,
        metricsFactory: any MetricsFactory,
        logger: Logger
    ) {
        self.database = database
        self.store = store
        self.outbox = outbox
        self.maxBatch = maxBatch
        self.writers = writers
        self.logger = logger
        self.batchSize = Recorder(label: "match_swipe_batch_size", factory: metricsFactory)
        self.commitTime = CoreMetrics.Timer(label: "match_swipe_commit_seconds", factory: metricsFactory)
        self.batchFailures = Counter(label: "match_swipe_batch_failures_total", factory: metricsFactory)
    }

    /// Submits one swipe and waits until its batch committed. Throws `MatchError` for this swipe alone, or the
    /// batch's database error (nothing of the batch was written; the caller may retry: swipes are idempotent).
    public func submit(_ command: SwipeCommand) async throws -> SwipeReply {
        try await withCheckedThrowingContinuation { continuation in
            let startWriter = self.state.withLock { state -> Bool in
                state.queue.append(
                    Pending(
                        command: command, continuation: continuation,
                        trace: TraceSwitch.isOn ? ServiceContext.current : nil))
                guard state.running < self.writers else { return false }
                state.running += 1
                return true
            }
            if startWriter {
                Task { await self.drain() }
            }
        }
    }

    /// One writer: takes batches until the queue is empty.
    private func drain() async {
        var batch = self.take(endingWriterIfEmpty: true)
        while !batch.isEmpty {
            let leftover: [Pending]
            do {
                leftover = try await ServiceContext.withValue(batch[0].trace) {
                    try await self.database.withConnection { await self.chain(batch, on: $0) }
                }
            } catch {
                leftover = batch  // no connection: nothing of it was sent
            }
            if !leftover.isEmpty { await self.commitAlone(leftover) }
            batch = self.take(endingWriterIfEmpty: true)
        }
    }

    /// Up to `maxBatch` queued swipes; when there are none and `endingWriterIfEmpty`, the writer ends (under the
    /// same lock, so a swipe queued after it starts a writer of its own).
    private func take(endingWriterIfEmpty: Bool) -> [Pending] {
        self.state.withLock { state -> [Pending] in
            let batch = Array(state.queue.prefix(self.maxBatch))
            state.queue.removeFirst(batch.count)
            if batch.isEmpty && endingWriterIfEmpty { state.running -= 1 }
            return batch
        }
    }

    /// Commits `first`, then, while more swipes wait, the batches after it on the same connection: each round
    /// trip carries one batch's writes and COMMIT and the next batch's BEGIN, locks and load. Answers the callers
    /// of every batch it commits or that fails for good; returns the swipes it could not settle (nothing of them
    /// was committed: their load failed, or their batch hit a deadlock or serialization failure), for
    /// ``commitAlone(_:)``. Leaves the connection outside any transaction.
    private func chain(_ first: [Pending], on connection: PostgresConnection) async -> [Pending] {
        var batch = first
        var now = PostgresTimestamp.now
        var started = ContinuousClock.now
        var facts: [SwipeFacts]
        do {
            facts = try await self.store.beginAndLoad(batch.map(\.command), now: now, on: connection)
        } catch {
            _ = try? await connection.execute("ROLLBACK")
            return batch
        }
        while true {
            let decided: SwipeBatch
            let writes: [PostgresQuery]
            do {
                decided = try SwipeBatch(
                    commands: batch.map(\.command), facts: facts, nowUnixMs: now.millisecondsSinceEpoch,
                    ids: { try UUIDv7.generate() })
                writes = self.store.writeQueries(
                    swipes: decided.newSwipes, created: decided.newMatches, reciprocated: decided.reciprocated,
                    events: try self.outbox.appendQuery(Self.traced(decided.events, batch)))
            } catch {
                _ = try? await connection.execute("ROLLBACK")
                self.fail(batch, error)
                return []
            }
            self.batchSize.record(batch.count)
            let next = self.take(endingWriterIfEmpty: false)
            let nextNow = PostgresTimestamp.now
            let nextStarted = ContinuousClock.now
            let committed: Result<Void, any Error>
            var loaded: Result<[SwipeFacts], any Error>?
            do {
                if next.isEmpty {
                    try await self.store.commit(writes, on: connection)
                    committed = .success(())
                } else {
                    (committed, loaded) = try await self.store.commitAndBeginNext(
                        writes, next: next.map(\.command), now: nextNow, on: connection)
                }
            } catch {
                // The connection is gone (or the lone commit failed): whether the batch committed is unknown to
                // its callers, who may retry (swipes are idempotent); the next batch only began.
                _ = try? await connection.execute("ROLLBACK")
                if Self.isRetryable(error) { return batch + next }
                self.fail(batch, error)
                return next
            }
            switch committed {
            case .success:
                self.commitTime.recordNanoseconds(Int64((ContinuousClock.now - started).nanoseconds))
                if !decided.events.isEmpty { self.outbox.announce(through: self.database) }
                for (pending, outcome) in zip(batch, decided.outcomes) {
                    pending.continuation.resume(with: outcome.mapError { $0 as any Error })
                }
            case .failure(let error):
                _ = try? await connection.execute("ROLLBACK")
                if Self.isRetryable(error) { return batch + next }
                self.fail(batch, error)
                return next
            }
            switch loaded {
            case nil:
                return []
            case .failure?:
                _ = try? await connection.execute("ROLLBACK")
                return next
            case .success(let nextFacts)?:
                (batch, facts, now, started) = (next, nextFacts, nextNow, nextStarted)
            }
        }
    }

    /// Commits a batch in a transaction of its own (with retries), and answers its callers.
    private func commitAlone(_ batch: [Pending]) async {
        self.batchSize.record(batch.count)
        let started = ContinuousClock.now
        do {
            let outcomes = try await ServiceContext.withValue(batch[0].trace) { try await self.commit(batch) }
            self.commitTime.recordNanoseconds(Int64((ContinuousClock.now - started).nanoseconds))
            for (pending, outcome) in zip(batch, outcomes) {
                pending.continuation.resume(with: outcome.mapError { $0 as any Error })
            }
        } catch {
            self.fail(batch, error)
        }
    }

    private func fail(_ batch: [Pending], _ error: any Error) {
        self.batchFailures.increment()
        self.logger.warning("swipe batch failed", metadata: ["batch.size": "\(batch.count)", "error": "\(error)"])
        for pending in batch { pending.continuation.resume(throwing: error) }
    }

    /// `events` stamped with the trace of the swipe they come from (its swiper's first in the batch; the events
    /// of a batch are the swipers' own, in `SwipeBatch`), before the outbox would stamp them with the writer's.
    private static func traced(_ events: [Kindred.Common.V1.Event], _ batch: [Pending]) -> [Kindred.Common.V1.Event] {
        guard TraceSwitch.isOn else { return events }
        var traces: [String: [String: String]] = [:]
        for pending in batch.reversed() {
            if let trace = pending.trace { traces[pending.command.swiper] = TraceSwitch.headers(of: trace) }
        }
        return events.map { event in
            guard let headers = traces[event.userId] else { return event }
            var event = event
            event.traceparent = headers[TraceHeaders.traceparent] ?? ""
            event.tracestate = headers[TraceHeaders.tracestate] ?? ""
            return event
        }
    }

    /// A deadlock or serialization failure (``PostgresError/isTransactionConflict``): the transaction was rolled
    /// back and may run again.
    private static func isRetryable(_ error: any Error) -> Bool {
        (error as? PostgresError)?.isTransactionConflict ?? false
    }

    /// Commits one batch, retrying it (up to 3 runs) on a deadlock or serialization failure.
    private func commit(_ pending: [Pending]) async throws -> [Result<SwipeReply, MatchError>] {
        let commands = pending.map(\.command)
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await self.database.withConnection { connection in
                    do {
                        let now = PostgresTimestamp.now
                        let facts = try await self.store.beginAndLoad(commands, now: now, on: connection)
                        let batch = try SwipeBatch(
                            commands: commands, facts: facts, nowUnixMs: now.millisecondsSinceEpoch,
                            ids: { try UUIDv7.generate() })
                        try await self.store.commit(
                            self.store.writeQueries(
                                swipes: batch.newSwipes, created: batch.newMatches, reciprocated: batch.reciprocated,
                                events: try self.outbox.appendQuery(Self.traced(batch.events, pending))),
                            on: connection)
                        if !batch.events.isEmpty { self.outbox.announce(through: self.database) }
                        return batch.outcomes
                    } catch {
                        _ = try? await connection.execute("ROLLBACK")
                        throw error
                    }
                }
            } catch where attempt < 3 && Self.isRetryable(error) {
                try await Task.sleep(for: .microseconds(Int.random(in: 500...5_000) * attempt))
            }
        }
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = self.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
