import KindredProto
import KindredServiceKit
import Testing

@testable import KindredNotify

/// ``EventBatchLocks``: which locks a batch takes before its first event, and in which order.
@Suite("The locks an event batch takes first")
struct EventBatchLocksTests {
    static func ids(_ count: Int) throws -> [String] { try (0..<count).map { _ in try UUIDv7.generate() }.sorted() }

    @Test func messagesAndLikesNameTheirPairsSortedAndALikeItsDigest() throws {
        let (a, b, c, d) = try { (ids: [String]) in (ids[0], ids[1], ids[2], ids[3]) }(Self.ids(4))
        let locks = EventBatchLocks([
            try MessageQueueTests.sent(d, to: c, thread: try UUIDv7.generate()),
            try LikesDigestQueueTests.like(b, a),
            try MessageQueueTests.sent(a, to: b, thread: try UUIDv7.generate()),
        ])
        #expect(locks.members == [a, b, c, d])
        #expect(locks.pairs == [BlockStore.pair(a, b), BlockStore.pair(c, d)].sorted())
        #expect(locks.pairs.count == 2, "a message and a like of one pair share its lock")
        #expect(locks.digests == [a])
    }

    @Test func twoBatchesOfTheSamePairsInOppositeOrdersTakeThemInOneOrder() throws {
        let (a, b, c, d) = try { (ids: [String]) in (ids[0], ids[1], ids[2], ids[3]) }(Self.ids(4))
        let thread = try UUIDv7.generate()
        let first = EventBatchLocks([
            try MessageQueueTests.sent(a, to: b, thread: thread), try MessageQueueTests.sent(c, to: d, thread: thread),
        ])
        let second = EventBatchLocks([
            try MessageQueueTests.sent(d, to: c, thread: thread), try MessageQueueTests.sent(b, to: a, thread: thread),
        ])
        #expect(first == second)
    }

    @Test func aDeletionAPassAndMalformedIdsTakeNoPairOrDigestLock() throws {
        let (a, b) = try { (ids: [String]) in (ids[0], ids[1]) }(Self.ids(2))
        var deleted = Kindred.Common.V1.Event()
        deleted.userId = a
        deleted.payload = .accountDeleted(.init())
        let locks = EventBatchLocks([
            deleted, try LikesDigestQueueTests.like(a, b, action: .pass),
            try MessageQueueTests.sent(a, to: "not-an-id", thread: try UUIDv7.generate()),
            try MessageQueueTests.sent(a, to: a, thread: try UUIDv7.generate()),
        ])
        #expect(locks.pairs.isEmpty && locks.digests.isEmpty)
        #expect(locks.members == [a, b], "the pass still checks both members' tombstones; the deletion takes its own")
    }

    @Test func aBlockTakesBothMembersActivityLocksAndABroadcastItsBroadcasters() throws {
        let (a, b, c, d) = try { (ids: [String]) in (ids[0], ids[1], ids[2], ids[3]) }(Self.ids(4))
        var block = Kindred.Common.V1.Event()
        block.userId = d
        block.payload = .userBlocked(.with { $0.blockedUserId = b })
        let locks = EventBatchLocks([
            block, try ActivityNotificationTests.started(by: c, to: [a], broadcast: try UUIDv7.generate()),
        ])
        #expect(locks.activities == [b, c, d])
        #expect(locks.pairs == [BlockStore.pair(b, d)])
    }
}
