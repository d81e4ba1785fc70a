import KindredProto

/// One event read from the outbox for delivery.
public struct OutboxEvent: Sendable, Hashable {
    public var eventID: String
    public var partition: String
    public var sequence: Int64
    /// The serialized `kindred.common.v1.Event`.
    public var payload: [UInt8]

    public init(eventID: String, partition: String, sequence: Int64, payload: [UInt8]) {
        self.eventID = eventID
        self.partition = partition
        self.sequence = sequence
        self.payload = payload
    }
}

/// A partition the relay has leased for one consumer, with the last sequence that consumer acknowledged and the
/// last one appended for it when the lease was taken.
public struct ClaimedPartition: Sendable, Hashable {
    public var partition: String
    public var acknowledged: Int64
    public var appended: Int64
    /// Failed attempts in a row so far (drives the backoff).
    public var attempts: Int

    public init(partition: String, acknowledged: Int64, appended: Int64, attempts: Int) {
        self.partition = partition
        self.acknowledged = acknowledged
        self.appended = appended
        self.attempts = attempts
    }
}

/// The delivery of one batch to one consumer, as a value: which events go out, and — from the consumer's
/// answer — how far each partition's cursor moves. No I/O; ``OutboxRelay`` does the reading and writing.
///
/// Rules (proto/kindred/common/v1/events.proto):
/// - At most ``maxBatch`` events, in outbox order; a partition's events are a gap-free run starting right
///   after its acknowledged sequence (later ones wait for the next batch).
/// - A partition's cursor moves to the end of the acknowledged *prefix* of its events in the batch: an
///   acknowledgement after a missing one (a consumer breaking the contract) is not trusted, so the event
///   is sent again rather than skipped.
/// - A partition whose events were not all acknowledged failed: it backs off. One that had no event in the
///   batch (the batch was full) is released unchanged.
public struct DeliveryPlan: Sendable, Hashable {
    /// The contract's batch limit.
    public static let maxBatch = 100

    /// Where a partition's cursor goes after the call.
    public enum Outcome: Sendable, Hashable {
        /// Every event sent was acknowledged: cursor to `acknowledged`, attempts reset.
        case delivered(acknowledged: Int64, count: Int)
        /// Some were not: cursor to `acknowledged` (the prefix), attempts + 1 and back off.
        case failed(acknowledged: Int64, count: Int)
        /// Nothing of the partition was sent (the batch was full): release it as it was.
        case untouched
        /// The outbox holds nothing for the consumer after the cursor (events purged, or of types it no longer
        /// applies): move the cursor to `through`, the partition's end when it was claimed, so it stops being
        /// claimed. Not to its end now: an event appended since is still to be sent.
        case nothingPending(through: Int64)
    }

    public let claimed: [ClaimedPartition]
    /// The events to send, in order.
    public let batch: [OutboxEvent]
    /// Partitions that had no event at all in a read that was not cut short by its limit.
    private let empty: Set<String>

    /// Builds the batch from `events` (read in outbox order for the claimed partitions). Events that do not
    /// continue their partition's run (a sequence at or below the cursor or the previous one, an unclaimed
    /// partition) are left out, as is everything past ``maxBatch``. Sequences may have gaps.
    ///
    /// `readLimit`: the limit the events were read with; a read that reached it may have left partitions out,
    /// so only a shorter read proves a partition has nothing pending.
    public init(
        claimed: [ClaimedPartition],
        events: [OutboxEvent],
        readLimit: Int = DeliveryPlan.maxBatch,
        maxBatch: Int = DeliveryPlan.maxBatch
    ) {
        self.claimed = claimed
        let read = Set(events.map(\.partition))
        self.empty = events.count < readLimit ? Set(claimed.map(\.partition)).subtracting(read) : []
        var last = Dictionary(uniqueKeysWithValues: claimed.map { ($0.partition, $0.acknowledged) })
        var batch: [OutboxEvent] = []
        for event in events where batch.count < maxBatch {
            guard let previous = last[event.partition] else { continue }
            guard event.sequence > previous else { continue }
            batch.append(event)
            last[event.partition] = event.sequence
        }
        // A full batch cuts partitions anywhere: fine, the rest of each run follows in the next batch.
        self.batch = batch
    }

    /// The outcome per claimed partition once the consumer acknowledged `acknowledgedIDs`.
    public func outcomes(acknowledgedIDs: Set<String>) -> [String: Outcome] {
        var outcomes: [String: Outcome] = [:]
        var acknowledged = Dictionary(uniqueKeysWithValues: self.claimed.map { ($0.partition, $0.acknowledged) })
        let appended = Dictionary(uniqueKeysWithValues: self.claimed.map { ($0.partition, $0.appended) })
        var count: [String: Int] = [:]
        var broken = Set<String>()
        for event in self.batch {
            if broken.contains(event.partition) { continue }
            if acknowledgedIDs.contains(event.eventID) {
                acknowledged[event.partition] = event.sequence
                count[event.partition, default: 0] += 1
            } else {
                broken.insert(event.partition)
            }
        }
        let sent = Set(self.batch.map(\.partition))
        for partition in self.claimed.map(\.partition) {
            let cursor = acknowledged[partition]!
            let delivered = count[partition] ?? 0
            if self.empty.contains(partition) {
                outcomes[partition] = .nothingPending(through: appended[partition]!)
            } else if !sent.contains(partition) {
                outcomes[partition] = .untouched
            } else if broken.contains(partition) {
                outcomes[partition] = .failed(acknowledged: cursor, count: delivered)
            } else {
                outcomes[partition] = .delivered(acknowledged: cursor, count: delivered)
            }
        }
        return outcomes
    }

    /// The outcome per claimed partition when the call itself failed: every partition sent failed.
    public func outcomesOfFailedCall() -> [String: Outcome] {
        self.outcomes(acknowledgedIDs: [])
    }
}

/// Exponential backoff with jitter for a failing partition: `initial · 2^(attempt-1)` capped at `maximum`,
/// then a random point in its upper half ("equal jitter"), so replicas retrying the same consumer spread
/// out but never retry sooner than half the nominal delay.
public struct RetryBackoff: Sendable, Hashable {
    public var initial: Duration
    public var maximum: Duration

    public init(initial: Duration = .milliseconds(200), maximum: Duration = .seconds(60)) {
        self.initial = initial
        self.maximum = maximum
    }

    /// The nominal delay before attempt `attempt + 1` after `attempt` failures (attempt ≥ 1).
    public func nominal(afterFailures attempt: Int) -> Duration {
        let exponent = min(max(attempt, 1) - 1, 30)
        let delay = self.initial * (1 << exponent)
        return min(delay, self.maximum)
    }

    /// The delay with jitter; `unit` is a random number in 0..<1 (injected so tests can pin it).
    public func delay(afterFailures attempt: Int, unit: Double = Double.random(in: 0..<1)) -> Duration {
        let nominal = self.nominal(afterFailures: attempt)
        return nominal / 2 + nominal / 2 * min(max(unit, 0), 1)
    }
}
