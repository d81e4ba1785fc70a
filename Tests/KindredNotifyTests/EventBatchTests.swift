import Foundation
import KindredGRPC
import Synchronization
import KindredPostgres
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import Testing

@testable import KindredNotify

/// Notify applies each `DeliverEvents` batch in one transaction, against PostgreSQL: batches applied at once do not
/// wait on each other in a cycle, and a message never waits for a sender recording how its thread's claimed
/// notification ended.
@Suite("Notify's event batches against PostgreSQL")
struct EventBatchTests {
    /// Two relay loops deliver at once batches naming the same two pairs in opposite orders. Each batch holds the
    /// pair locks it took until its commit: taken event by event, the two would wait on each other until
    /// PostgreSQL's deadlock check failed one event (left unacknowledged). Taken first in one order, both apply whole.
    @Test func batchesNamingTheSamePairsInOppositeOrdersAreBothAppliedWhole() async throws {
        try await NotifyHarness.with(settings: ["KINDRED_NOTIFY_MESSAGE_COLLAPSE_MS": "60000"]) { harness in
            for _ in 0..<8 {
                let (a, b, c, d) = (
                    try NotifyHarness.member().id, try NotifyHarness.member().id, try NotifyHarness.member().id,
                    try NotifyHarness.member().id
                )
                let (ab, cd) = (try UUIDv7.generate(), try UUIDv7.generate())
                let batches = [
                    [try MessageQueueTests.sent(a, to: b, thread: ab), try MessageQueueTests.sent(c, to: d, thread: cd)],
                    [try MessageQueueTests.sent(d, to: c, thread: cd), try MessageQueueTests.sent(b, to: a, thread: ab)],
                ]
                let acknowledged = try await withThrowingTaskGroup(of: Int.self) { group in
                    for batch in batches {
                        group.addTask {
                            let ids = try await harness.client.deliver(
                                N.deliverEvents, batch, from: "chat", tokens: testKeys)
                            return Set(ids) == Set(batch.map(\.eventId)) ? 1 : 0
                        }
                    }
                    return try await group.reduce(0, +)
                }
                #expect(acknowledged == 2, "a batch was not applied whole")
                for member in [a, b, c, d] {
                    #expect(try await MessageQueueTests.rows(harness, member).count == 1)
                }
            }
        }
    }

    /// The notification of a thread is claimed and a sender is recording its end (its row locked): a message of the
    /// thread arriving meanwhile is queued as a notification of its own without waiting for that record.
    @Test func aMessageDoesNotWaitForTheRecordOfItsThreadsClaimedNotification() async throws {
        try await NotifyHarness.with(settings: ["KINDRED_NOTIFY_MESSAGE_COLLAPSE_MS": "0"]) { harness in
            let (ann, bob) = (try NotifyHarness.member(), try NotifyHarness.member())
            let thread = try UUIDv7.generate()
            _ = try await harness.client.deliver(
                N.deliverEvents, [try MessageQueueTests.sent(ann.id, to: bob.id, thread: thread)], from: "chat",
                tokens: testKeys)
            let claimed = try await NotificationStore().claimDue(limit: 10, lease: .seconds(60), in: harness.database)
            #expect(claimed.count == 1)
            let next = try MessageQueueTests.sent(ann.id, to: bob.id, thread: thread)
            let appliedWhileLocked = try await harness.database.withTransaction { transaction in
                _ = try await transaction.query(
                    "SELECT 1 FROM notifications WHERE notification_id = \(claimed[0].id)::uuid FOR UPDATE")
                // The delivery, or 60 s with the row still locked, whichever ends first.
                return try await withThrowingTaskGroup(of: Bool.self) { group in
                    group.addTask {
                        _ = try await harness.client.deliver(N.deliverEvents, [next], from: "chat", tokens: testKeys)
                        return true
                    }
                    group.addTask {
                        try await Task.sleep(for: .seconds(60))
                        return false
                    }
                    let first = try await group.next() ?? false
                    group.cancelAll()
                    return first
                }
            }
            #expect(appliedWhileLocked, "the message waited for the claimed notification's row")
            #expect(try await MessageQueueTests.rows(harness, bob.id).map(\.1) == [1, 1])
        }
    }

    /// Set once a delivery answered.
    final class Answered: Sendable {
        let value = Mutex(false)
    }

    /// Ann blocks Bob while Bob's activity broadcast, naming Ann and Cat, is applied: the block's transaction is held
    /// open here (its effects applied, not committed) while the broadcast is delivered. The broadcast either waits for
    /// the block's commit (then its statement sees the block) or ends first (then the block's cancellation would
    /// have to see what it queued, which it cannot: it ran before). Ann is told nothing; Cat is.
    @Test func anActivityAppliedAtOnceWithABlockQueuesNothingAboutThePair() async throws {
        try await NotifyHarness.with { harness in
            let (ann, bob, cat) = (try NotifyHarness.member(), try NotifyHarness.member(), try NotifyHarness.member())
            let service = harness.server.server.service
            var block = Kindred.Common.V1.Event()
            block.eventId = try UUIDv7.generate()
            block.producer = "match"
            block.userId = ann.id
            block.sequence = 1
            block.payload = .userBlocked(.with { $0.blockedUserId = bob.id })
            let activity = try ActivityNotificationTests.started(
                by: bob.id, to: [ann.id, cat.id], broadcast: try UUIDv7.generate())
            let answered = Answered()
            let delivery = try await harness.database.withTransaction { transaction in
                let locks = EventBatchLocks([block])
                try await locks.take(in: transaction, of: service)
                var facts = try await service.facts(of: locks, in: transaction)
                try await service.apply(block, holding: locks, facts: &facts, in: transaction)
                let delivery = Task {
                    defer { answered.value.withLock { $0 = true } }
                    return try await harness.client.deliver(
                        N.deliverEvents, [activity], from: "match", tokens: testKeys)
                }
                // Commit once the broadcast waits for a lock or has answered (60 s at most).
                let deadline = ContinuousClock.now + .seconds(60)
                while ContinuousClock.now < deadline, !answered.value.withLock({ $0 }) {
                    let waiting = try await harness.database.query(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                    ).scalar(Int64.self)
                    if waiting > 0 { break }
                    try await Task.sleep(for: .milliseconds(10))
                }
                return delivery
            }
            #expect(try await delivery.value == [activity.eventId])
            #expect(try await BlockedPairTests.kinds(harness, ann.id).isEmpty, "Ann was queued Bob's activity")
            #expect(try await BlockedPairTests.kinds(harness, cat.id) == ["activity:pending"])
        }
    }
}
