import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import Testing

@testable import KindredNotify

/// Events are ordered only within one member's partition: a like, a match, a message or an activity about a pair
/// (the other member's partition) may arrive after the block. Notify keeps the blocks it applied and counts or
/// queues nothing about a pair blocked either way; an unblock restores the usual behaviour.
@Suite("Events about a pair applied after its block, against PostgreSQL")
struct BlockedPairTests {
    static func block(_ blocker: String, _ blocked: String, sequence: Int64, unblock: Bool = false) throws
        -> Kindred.Common.V1.Event
    {
        var event = Kindred.Common.V1.Event()
        event.eventId = try UUIDv7.generate()
        event.userId = blocker
        event.sequence = sequence
        event.payload =
            unblock
            ? .userUnblocked(.with { $0.unblockedUserId = blocked }) : .userBlocked(.with { $0.blockedUserId = blocked })
        return event
    }

    /// (kind, state) of every notification to `user`, sorted.
    static func kinds(_ harness: NotifyHarness, _ user: String) async throws -> [String] {
        try await harness.database.query(
            "SELECT kind || ':' || state FROM notifications WHERE user_id = \(user)::uuid ORDER BY kind, state"
        ).map { try $0.decode(String.self) }
    }

    /// Ann blocked Bob and Dan blocked Ann before their like, match, message and activity reach notify: Ann's digest
    /// counts Cat's like only, and nobody gets a match, a message or an activity notification about the other side.
    @Test func aBlockAppliedFirstKeepsLaterEventsAboutThePairOut() async throws {
        try await NotifyHarness.with { harness in
            let (ann, bob, cat, dan) = try (
                NotifyHarness.member(), NotifyHarness.member(), NotifyHarness.member(), NotifyHarness.member()
            )
            _ = try await harness.client.deliver(
                N.deliverEvents, [try Self.block(ann.id, bob.id, sequence: 7), try Self.block(dan.id, ann.id, sequence: 3)],
                from: "match", tokens: testKeys)
            _ = try await harness.client.deliver(
                N.deliverEvents,
                [try LikesDigestQueueTests.like(bob.id, ann.id), try LikesDigestQueueTests.like(dan.id, ann.id),
                 try LikesDigestQueueTests.like(cat.id, ann.id)],
                from: "match", tokens: testKeys)
            // Counted before the matches below, which would take a like out anyway.
            #expect(try await LikesDigestQueueTests.digests(harness, ann.id).map { "\($0.0):\($0.1)" } == ["pending:1"])
            _ = try await harness.client.deliver(
                N.deliverEvents,
                [try QueueTests.matchCreated(bob.id, ann.id, match: try UUIDv7.generate()),
                 try QueueTests.matchCreated(ann.id, dan.id, match: try UUIDv7.generate()),
                 try ActivityNotificationTests.started(by: bob.id, to: [ann.id, cat.id], broadcast: try UUIDv7.generate())],
                from: "match", tokens: testKeys)
            _ = try await harness.client.deliver(
                N.deliverEvents,
                [try MessageQueueTests.sent(bob.id, to: ann.id, thread: try UUIDv7.generate()),
                 try MessageQueueTests.sent(ann.id, to: dan.id, thread: try UUIDv7.generate())],
                from: "chat", tokens: testKeys)
            #expect(try await LikesDigestQueueTests.digests(harness, ann.id).map { "\($0.0):\($0.1)" } == ["pending:1"])
            #expect(try await Self.kinds(harness, ann.id) == ["likes:pending"])
            #expect(try await Self.kinds(harness, bob.id) == [])
            #expect(try await Self.kinds(harness, dan.id) == [])
            // The control: Cat, who blocked nobody, is told of Bob's activity.
            #expect(try await Self.kinds(harness, cat.id) == ["activity:pending"])
            #expect(try await harness.footprint(ann.id)["blocks"] == 2)
        }
    }

    /// An unblock lifts the block: a like, a match and a message are told again. An older block delivered after it
    /// (a lower sequence in the blocker's partition) neither restores the block nor cancels anything.
    @Test func anUnblockRestoresAndAnOlderBlockDoesNotWin() async throws {
        try await NotifyHarness.with { harness in
            let (ann, bob) = (try NotifyHarness.member(), try NotifyHarness.member())
            _ = try await harness.client.deliver(
                N.deliverEvents,
                [try Self.block(ann.id, bob.id, sequence: 1), try Self.block(ann.id, bob.id, sequence: 2, unblock: true)],
                from: "match", tokens: testKeys)
            _ = try await harness.client.deliver(
                N.deliverEvents, [try LikesDigestQueueTests.like(bob.id, ann.id)], from: "match", tokens: testKeys)
            _ = try await harness.client.deliver(
                N.deliverEvents, [try MessageQueueTests.sent(bob.id, to: ann.id, thread: try UUIDv7.generate())],
                from: "chat", tokens: testKeys)
            #expect(try await Self.kinds(harness, ann.id) == ["likes:pending", "new_message:pending"])
            _ = try await harness.client.deliver(
                N.deliverEvents,
                [try Self.block(ann.id, bob.id, sequence: 1),
                 try QueueTests.matchCreated(ann.id, bob.id, match: try UUIDv7.generate())],
                from: "match", tokens: testKeys)
            #expect(
                try await Self.kinds(harness, ann.id) == ["likes:pending", "new_match:pending", "new_message:pending"])
            #expect(try await Self.kinds(harness, bob.id) == ["new_match:pending"])
            // A newer block cancels what is pending and keeps what comes later out.
            _ = try await harness.client.deliver(
                N.deliverEvents, [try Self.block(bob.id, ann.id, sequence: 5)], from: "match", tokens: testKeys)
            _ = try await harness.client.deliver(
                N.deliverEvents, [try MessageQueueTests.sent(bob.id, to: ann.id, thread: try UUIDv7.generate())],
                from: "chat", tokens: testKeys)
            // The digest stands for no like any more (the sender cancels it); the rest is cancelled.
            #expect(
                try await Self.kinds(harness, ann.id) == ["likes:pending", "new_match:cancelled", "new_message:cancelled"])
            #expect(try await LikesDigestQueueTests.digests(harness, ann.id).map { "\($0.0):\($0.1)" } == ["pending:0"])
        }
    }

    /// A deleted member leaves no block row, made or received.
    @Test func deletionErasesTheMembersBlocks() async throws {
        try await NotifyHarness.with { harness in
            let (ann, bob, cat) = (try NotifyHarness.member(), try NotifyHarness.member(), try NotifyHarness.member())
            _ = try await harness.client.deliver(
                N.deliverEvents,
                [try Self.block(ann.id, bob.id, sequence: 1), try Self.block(cat.id, ann.id, sequence: 1),
                 try Self.block(bob.id, cat.id, sequence: 1)],
                from: "match", tokens: testKeys)
            _ = try await harness.client.deliver(
                N.deliverEvents, [try DeletedMemberTests.deleted(ann.id)], from: "auth", tokens: testKeys)
            #expect(try await harness.footprint(ann.id) == DeletedMemberTests.zero)
            #expect(try await harness.footprint(bob.id)["blocks"] == 1)
            #expect(try await harness.footprint(cat.id)["blocks"] == 1)
        }
    }
}
