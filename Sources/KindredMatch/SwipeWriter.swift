import CoreMetrics
import Foundation
import KindredPostgres
import KindredServiceKit
import Logging
import Synchronization

/// Group commit of swipes: concurrent callers' swipes are collected and committed together, at most `maxBatch`
/// per transaction and `writers` transactions at once. A caller is answered only after the transaction holding
/// its swipe committed (`synchronous_commit` stays on: acknowledged swipes survive a crash).
///
/// No timer: a writer starts as soon as a swipe arrives and a writer slot is free (an idle service commits a
/// lone swipe at once); while the writers are busy, arriving swipes queue up and the next free writer takes
/// them all (up to `maxBatch`). A batch is two round trips: BEGIN + pair locks + one load statement in one
/// pipeline; the swipes, matches, events and COMMIT in another (`SwipeStore`). The decisions in between are
/// `SwipeBatch` (no I/O).
public final class SwipeWriter: Sendable {
    private struct Pending {
        var command: SwipeCommand
        var continuation: CheckedContinuation<SwipeReply, any Error>
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
                state.queue.append(Pending(command: command, continuation: continuation))
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
        while true {
            let batch = self.state.withLock { state -> [Pending] in
                let batch = Array(state.queue.prefix(self.maxBatch))
                state.queue.removeFirst(batch.count)
                if batch.isEmpty { state.running -= 1 }
                return batch
            }
            if batch.isEmpty { return }
            self.batchSize.record(batch.count)
            let started = ContinuousClock.now
            do {
                let outcomes = try await self.commit(batch.map(\.command))
                self.commitTime.recordNanoseconds(Int64((ContinuousClock.now - started).nanoseconds))
                for (pending, outcome) in zip(batch, outcomes) {
                    pending.continuation.resume(with: outcome.mapError { $0 as any Error })
                }
            } catch {
                self.batchFailures.increment()
                self.logger.warning(
                    "swipe batch failed", metadata: ["batch.size": "\(batch.count)", "error": "\(error)"])
                for pending in batch { pending.continuation.resume(throwing: error) }
            }
        }
    }

    /// Commits one batch, retrying it (up to 3 runs) on a deadlock or serialization failure.
    private func commit(_ commands: [SwipeCommand]) async throws -> [Result<SwipeReply, MatchError>] {
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
                        try await self.store.writeAndCommit(
                            swipes: batch.newSwipes,
                            created: batch.newMatches,
                            reciprocated: batch.reciprocated,
                            events: try self.outbox.appendQuery(batch.events),
                            on: connection
                        )
                        return batch.outcomes
                    } catch {
                        _ = try? await connection.execute("ROLLBACK")
                        throw error
                    }
                }
            } catch let error as PostgresError where attempt < 3 && ["40001", "40P01"].contains(error.sqlState ?? "") {
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
