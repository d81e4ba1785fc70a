import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import Testing

@testable import KindredNotify

@Suite("Likes digest schedule as a value")
struct LikesDigestScheduleTests {
    static let hour: Int64 = 3_600_000
    static let digest = LikesDigest(interval: .seconds(4 * 3600))

    @Test(arguments: [
        // Never had a digest: the first like waits a minute for others.
        (nil, Int64(60_000)),
        // The last digest long ago: the same.
        (-10 * hour, Int64(60_000)),
        // The last digest an hour ago: not before four hours after it.
        (-1 * hour, 3 * hour),
        // Exactly four hours ago: a minute.
        (-4 * hour, Int64(60_000)),
    ] as [(Int64?, Int64)])
    func aDigestIsDueAMinuteAfterItsFirstLikeAndNeverWithinTheIntervalOfTheLast(last: Int64?, dueIn: Int64) {
        let now: Int64 = 1_800_000_000_000
        #expect(Self.digest.due(nowUnixMs: now, lastSentUnixMs: last.map { now + $0 }) == now + dueIn)
    }

    @Test func aShortIntervalGathersForThatLongOnly() {
        #expect(LikesDigest(interval: .seconds(2)).gather == .seconds(2))
        #expect(Self.digest.gather == .seconds(60))
    }

    @Test func aLikeJoinsTheWaitingDigestUnlessItIsOnItsWay() {
        let now: Int64 = 1_800_000_000_000
        let waiting = WaitingNotification(id: "d1", claimed: false, attempts: 0)
        #expect(Self.digest.action(waiting: waiting, nowUnixMs: now, lastSentUnixMs: nil) == .join("d1"))
        var claimed = waiting
        claimed.claimed = true
        #expect(
            Self.digest.action(waiting: claimed, nowUnixMs: now, lastSentUnixMs: now - Self.hour)
                == .queue(dueUnixMs: now + 3 * Self.hour))
    }
}

@Suite("Likes digests and report outcomes against PostgreSQL")
struct LikesDigestQueueTests {
    static func like(_ liker: String, _ liked: String, action: Kindred.Common.V1.SwipeAction = .like) throws
        -> Kindred.Common.V1.Event
    {
        var event = Kindred.Common.V1.Event()
        event.eventId = try UUIDv7.generate()
        event.userId = liker
        event.payload = .swipeRecorded(.with {
            $0.swipeId = try! UUIDv7.generate()
            $0.targetUserId = liked
            $0.action = action
        })
        return event
    }

    static func digests(_ harness: NotifyHarness, _ user: String) async throws -> [(String, Int)] {
        var rows: [(String, Int)] = []
        for row in try await harness.database.query(
            "SELECT notification_id::text, state FROM notifications WHERE user_id = \(user)::uuid AND kind = 'likes'")
        {
            let (id, state) = try row.decode((String, String).self)
            rows.append((state, try await DigestStore().counts(of: [id], in: harness.database)[id] ?? 0))
        }
        return rows
    }

    @Test func likesGatherInOneDigestAndABlockOrAMatchTakesOneOut() async throws {
        try await NotifyHarness.with { harness in
            let (ann, bob, cat, dan, eve) = try (
                NotifyHarness.member(), NotifyHarness.member(), NotifyHarness.member(), NotifyHarness.member(),
                NotifyHarness.member()
            )
            let likes = try [bob, cat, dan].map { try Self.like($0.id, ann.id) } + [try Self.like(eve.id, ann.id, action: .pass)]
            _ = try await harness.client.deliver(N.deliverEvents, likes, from: "match", tokens: testKeys)
            _ = try await harness.client.deliver(N.deliverEvents, [likes[0]], from: "match", tokens: testKeys)
            #expect(try await Self.digests(harness, ann.id).map { "\($0.0):\($0.1)" } == ["pending:3"])
            var block = Kindred.Common.V1.Event()
            block.eventId = try UUIDv7.generate()
            block.userId = ann.id
            block.payload = .userBlocked(.with { $0.blockedUserId = bob.id })
            _ = try await harness.client.deliver(
                N.deliverEvents, [block, try QueueTests.matchCreated(ann.id, cat.id, match: try UUIDv7.generate())],
                from: "match", tokens: testKeys)
            #expect(try await Self.digests(harness, ann.id).map { "\($0.0):\($0.1)" } == ["pending:1"])
            #expect(try await harness.footprint(dan.id)["digest_likes"] == 1)
            var deleted = Kindred.Common.V1.Event()
            deleted.eventId = try UUIDv7.generate()
            deleted.userId = dan.id
            deleted.payload = .accountDeleted(.init())
            _ = try await harness.client.deliver(N.deliverEvents, [deleted], from: "auth", tokens: testKeys)
            #expect(try await harness.footprint(dan.id)["digest_likes"] == 0)
            #expect(try await Self.digests(harness, ann.id).map { "\($0.0):\($0.1)" } == ["pending:0"])
        }
    }

    /// Likes from many swipers arrive as separate events applied side by side (each swiper is its own partition):
    /// they still make one digest, not one each.
    @Test func likesAppliedAtOnceGatherInOneDigest() async throws {
        try await NotifyHarness.with { harness in
            let ann = try NotifyHarness.member()
            let likes = try (0..<8).map { _ in try Self.like(try NotifyHarness.member().id, ann.id) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for like in likes {
                    group.addTask {
                        _ = try await harness.client.deliver(N.deliverEvents, [like], from: "match", tokens: testKeys)
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await Self.digests(harness, ann.id).map { "\($0.0):\($0.1)" } == ["pending:8"])
        }
    }

    @Test func aResolvedReportQueuesOneOutcomeForTheReporterAboutNobody() async throws {
        try await NotifyHarness.with { harness in
            let ann = try NotifyHarness.member()
            var resolved = Kindred.Common.V1.Event()
            resolved.eventId = try UUIDv7.generate()
            resolved.userId = ann.id
            resolved.payload = .reportResolved(.with { $0.reportId = try! UUIDv7.generate() })
            _ = try await harness.client.deliver(N.deliverEvents, [resolved], from: "match", tokens: testKeys)
            var again = resolved
            again.eventId = try UUIDv7.generate()
            _ = try await harness.client.deliver(N.deliverEvents, [again], from: "match", tokens: testKeys)
            #expect(try await NotificationStore().states(of: ann.id, kind: .reportOutcome, in: harness.database) == ["pending": 1])
            let subjects = try await harness.database.query(
                "SELECT count(*) FROM notifications WHERE user_id = \(ann.id)::uuid AND subject_user_id IS NOT NULL"
            ).scalar(Int64.self)
            #expect(subjects == 0)
        }
    }
}
