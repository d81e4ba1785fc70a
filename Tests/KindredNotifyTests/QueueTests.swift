import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import Testing

@testable import KindredNotify

@Suite("Notify's queue fed by match's events against PostgreSQL")
struct QueueTests {
    static func matchCreated(_ first: String, _ second: String, match: String) throws -> Kindred.Common.V1.Event {
        var event = Kindred.Common.V1.Event()
        event.eventId = try UUIDv7.generate()
        event.userId = first
        event.payload = .matchCreated(.with {
            $0.matchId = match
            $0.userIds = [first, second]
            $0.initiatorUserId = first
            $0.mode = .mutual
        })
        return event
    }

    static func states(_ harness: NotifyHarness, _ user: String) async throws -> [String: Int64] {
        try await NotificationStore().states(of: user, kind: .newMatch, in: harness.database)
    }

    @Test func aMatchQueuesExactlyOneNotificationForEachSide() async throws {
        try await NotifyHarness.with { harness in
            let (ann, bob) = (try NotifyHarness.member(), try NotifyHarness.member())
            let event = try Self.matchCreated(ann.id, bob.id, match: try UUIDv7.generate())
            _ = try await harness.client.deliver(N.deliverEvents, [event], from: "match", tokens: testKeys)
            // Delivered again with the same id, and once more as a new event about the same match: still one each.
            _ = try await harness.client.deliver(N.deliverEvents, [event], from: "match", tokens: testKeys)
            var copy = event
            copy.eventId = try UUIDv7.generate()
            _ = try await harness.client.deliver(N.deliverEvents, [copy], from: "match", tokens: testKeys)
            #expect(try await Self.states(harness, ann.id) == ["pending": 1])
            #expect(try await Self.states(harness, bob.id) == ["pending": 1])
        }
    }

    @Test func aMemberWhoTurnedMatchesOffGetsNone() async throws {
        try await NotifyHarness.with { harness in
            let (ann, bob) = (try NotifyHarness.member(), try NotifyHarness.member())
            var update = Notify.UpdateNotificationSettingsRequest()
            update.settings = .with { $0.newMessage = true }
            _ = try await harness.client.call(N.updateNotificationSettings, update, token: bob.token)
            let event = try Self.matchCreated(ann.id, bob.id, match: try UUIDv7.generate())
            _ = try await harness.client.deliver(N.deliverEvents, [event], from: "match", tokens: testKeys)
            #expect(try await Self.states(harness, ann.id) == ["pending": 1])
            #expect(try await Self.states(harness, bob.id) == [:])
        }
    }

    @Test func aBlockCancelsWhatIsPendingBetweenThePairOnly() async throws {
        try await NotifyHarness.with { harness in
            let (ann, bob, cat) = (try NotifyHarness.member(), try NotifyHarness.member(), try NotifyHarness.member())
            _ = try await harness.client.deliver(
                N.deliverEvents,
                [try Self.matchCreated(ann.id, bob.id, match: try UUIDv7.generate()),
                 try Self.matchCreated(ann.id, cat.id, match: try UUIDv7.generate())],
                from: "match", tokens: testKeys)
            var block = Kindred.Common.V1.Event()
            block.eventId = try UUIDv7.generate()
            block.userId = bob.id
            block.payload = .userBlocked(.with { $0.blockedUserId = ann.id })
            _ = try await harness.client.deliver(N.deliverEvents, [block], from: "match", tokens: testKeys)
            #expect(try await Self.states(harness, ann.id) == ["pending": 1, "cancelled": 1])
            #expect(try await Self.states(harness, bob.id) == ["cancelled": 1])
            #expect(try await Self.states(harness, cat.id) == ["pending": 1])
        }
    }

    @Test func deletionErasesNotificationsToAndAboutTheMember() async throws {
        try await NotifyHarness.with { harness in
            let (ann, bob) = (try NotifyHarness.member(), try NotifyHarness.member())
            _ = try await harness.client.deliver(
                N.deliverEvents, [try Self.matchCreated(ann.id, bob.id, match: try UUIDv7.generate())], from: "match",
                tokens: testKeys)
            #expect(try await harness.footprint(ann.id)["notifications"] == 2)
            var deleted = Kindred.Common.V1.Event()
            deleted.eventId = try UUIDv7.generate()
            deleted.userId = ann.id
            deleted.payload = .accountDeleted(.init())
            _ = try await harness.client.deliver(N.deliverEvents, [deleted], from: "auth", tokens: testKeys)
            #expect(try await harness.footprint(ann.id) == ["devices": 0, "settings": 0, "notifications": 0, "digest_likes": 0, "blocks": 0, "webhook_deliveries": 0])
            #expect(try await harness.footprint(bob.id)["notifications"] == 0)
        }
    }
}
