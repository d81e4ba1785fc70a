import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import KindredPresets
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
            NotificationTemplates.render(.activity, locale: "fr-CA", facts)
                == .init(title: "En pleine séance", body: "Alex s'entraîne en ce moment : sport collectif"))
        #expect(
            NotificationTemplates.render(.activity, locale: "fr", .init(name: nil))
                == .init(title: "En pleine séance", body: "Quelqu'un s'entraîne en ce moment"))
        // A key the preset does not list (a community's own list) is never shown raw: the text names no activity.
        let unknown = NotificationTemplates.Facts(name: "Alex", activity: "underwater_hockey")
        #expect(
            NotificationTemplates.render(.activity, locale: "en", unknown)
                == .init(title: "Working out now", body: "Alex is working out now"))
        #expect(
            NotificationTemplates.render(.activity, locale: "fr", unknown)
                == .init(title: "En pleine séance", body: "Alex s'entraîne en ce moment"))
    }

    /// Every activity of the fitness preset has a label in every language with texts, and none is the raw key
    /// where the key has an underscore.
    @Test func everyPresetActivityHasALabelInEachLanguage() throws {
        let definition = try #require(
            CommunityPresets.fitness.settings?.attributeDefinitions.first { $0.key == "activities" })
        #expect(ActivityLabels.languageCodes == ["en", "fr"])
        for language in NotificationTemplates.languageCodes {
            for choice in definition.choices {
                let label: String = try #require(ActivityLabels.label(of: choice.value, locale: language))
                #expect(!label.contains("_"), "\(language): \(choice.value)")
            }
        }
    }

    /// An activity push expires when the broadcast ends (the providers turn it into `apns-expiration`,
    /// `android.ttl` and `TTL`); a message's push keeps the provider's default.
    @Test func anActivityPushExpiresWhenTheBroadcastEnds() {
        let end = PostgresTimestamp.now.millisecondsSinceEpoch + 600_000
        var queued = QueuedNotification(
            id: "0190a4c8-0000-7000-8000-000000000001", user: "u", kind: .activity, subject: "s", collapseKey: nil,
            connection: false, attempts: 0, activity: "yoga", expiresUnixMs: end)
        let push = NotificationSender.push(queued, locale: "en", facts: .init(name: "Ann", activity: "yoga"), badge: nil)
        #expect(push.expiresAt == Date(timeIntervalSince1970: Double(end) / 1000))
        queued.kind = .newMessage
        queued.expiresUnixMs = nil
        #expect(NotificationSender.push(queued, locale: "en", facts: .init(), badge: 1).expiresAt == nil)
    }
}
