import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import Testing

@testable import KindredNotify

/// match's ActivityStarted in notify: one notification per follower named, none for a follower who turned
/// activities off, none twice, none after the broadcast expired, and a block cancels what is pending.
@Suite("Notify's activity notifications against PostgreSQL")
struct ActivityNotificationTests {
    static func started(by athlete: String, to followers: [String], broadcast: String, expiresInMs: Int64 = 3_600_000)
        throws -> Kindred.Common.V1.Event
    {
        var event = Kindred.Common.V1.Event()
        event.eventId = try UUIDv7.generate()
        event.userId = athlete
        event.communityId = "fitness"
        let now = PostgresTimestamp.now.millisecondsSinceEpoch
        event.payload = .activityStarted(
            .with {
                $0.broadcastId = broadcast
                $0.activity = "team_sports"
                $0.startedUnixMs = now
                $0.expiresUnixMs = now + expiresInMs
                $0.followerUserIds = followers
            })
        return event
    }

    static func states(_ harness: NotifyHarness, _ user: String) async throws -> [String: Int64] {
        try await NotificationStore().states(of: user, kind: .activity, in: harness.database)
    }

    @Test func eachFollowerWhoWantsThemGetsOne() async throws {
        try await NotifyHarness.with { harness in
            let (athlete, fan, quiet) = (try NotifyHarness.member(), try NotifyHarness.member(), try NotifyHarness.member())
            // quiet turns activities off (every other kind on).
            var update = Notify.UpdateNotificationSettingsRequest()
            update.settings = .with {
                $0.newMatch = true
                $0.newMessage = true
                $0.likesReceived = true
                $0.reportOutcome = true
                $0.activities = false
            }
            let saved = try await harness.client.call(N.updateNotificationSettings, update, token: quiet.token)
            #expect(!saved.activities)
            #expect(try await harness.client.call(N.getNotificationSettings, .init(), token: fan.token).activities, "default on")
            let broadcast = try UUIDv7.generate()
            let event = try Self.started(by: athlete.id, to: [fan.id, quiet.id, athlete.id, "not-an-id"], broadcast: broadcast)
            _ = try await harness.client.deliver(N.deliverEvents, [event], from: "match", tokens: testKeys)
            var again = event
            again.eventId = try UUIDv7.generate()
            _ = try await harness.client.deliver(N.deliverEvents, [again], from: "match", tokens: testKeys)
            #expect(try await Self.states(harness, fan.id) == ["pending": 1])
            #expect(try await Self.states(harness, quiet.id) == [:])
            #expect(try await Self.states(harness, athlete.id) == [:], "never to the broadcaster")
            let row = try #require(
                try await harness.database.query(
                    """
                    SELECT activity, collapse_key, subject_user_id::text FROM notifications WHERE user_id = \(fan.id)::uuid
                    """
                ).first)
            #expect(try row.decode(String.self, at: 0) == "team_sports")
            #expect(try row.decode(String.self, at: 1) == "activity-" + athlete.id)
            #expect(try row.decode(String.self, at: 2) == athlete.id)

            // The follower blocks the athlete: what is pending is cancelled.
            var block = Kindred.Common.V1.Event()
            block.eventId = try UUIDv7.generate()
            block.userId = fan.id
            block.payload = .userBlocked(.with { $0.blockedUserId = athlete.id })
            _ = try await harness.client.deliver(N.deliverEvents, [block], from: "match", tokens: testKeys)
            #expect(try await Self.states(harness, fan.id) == ["cancelled": 1])
        }
    }

    /// match listed a follower whose account auth deleted before notify read the event (the outboxes are not
    /// ordered): nothing is queued for them, and the other followers are told as usual.
    @Test func aFollowerDeletedBeforeTheEventGetsNothing() async throws {
        try await NotifyHarness.with { harness in
            let (athlete, gone, fan) = (try NotifyHarness.member(), try NotifyHarness.member(), try NotifyHarness.member())
            _ = try await harness.client.deliver(
                N.deliverEvents, [try DeletedMemberTests.deleted(gone.id)], from: "auth", tokens: testKeys)
            let event = try Self.started(by: athlete.id, to: [gone.id, fan.id], broadcast: try UUIDv7.generate())
            _ = try await harness.client.deliver(N.deliverEvents, [event], from: "match", tokens: testKeys)
            #expect(try await Self.states(harness, gone.id) == [:])
            #expect(try await Self.states(harness, fan.id) == ["pending": 1])
        }
    }

    @Test func anExpiredBroadcastQueuesNothing() async throws {
        try await NotifyHarness.with { harness in
            let (athlete, fan) = (try NotifyHarness.member(), try NotifyHarness.member())
            let event = try Self.started(by: athlete.id, to: [fan.id], broadcast: try UUIDv7.generate(), expiresInMs: -1)
            _ = try await harness.client.deliver(N.deliverEvents, [event], from: "match", tokens: testKeys)
            #expect(try await Self.states(harness, fan.id) == [:])
        }
    }

    @Test func templatesNameTheMemberAndTheActivity() {
        let facts = NotificationTemplates.Facts(name: "Alex", activity: "team_sports")
        #expect(
            NotificationTemplates.render(.activity, locale: "en-GB", facts)
                == .init(title: "Working out now", body: "Alex is working out now: team sports"))
        #expect(
            NotificationTemplates.render(.activity, locale: "fr", .init(name: nil))
                == .init(title: "En pleine séance", body: "Quelqu'un s'entraîne en ce moment"))
    }
}
