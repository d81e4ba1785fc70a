import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import Testing

@testable import KindredMatch

/// Activity broadcasts: who may start one, which activity, whom the ActivityStarted events name, the notify
/// interval, idempotent retries, followers' lists, blocks and erasure. Against a real PostgreSQL.
@Suite struct ActivityTests {
    static let activities = ["running", "cycling", "yoga"]

    /// A one-way community with an "activities" attribute (as the fitness preset), and a mutual one.
    static func communities(_ h: MatchHarness) async throws {
        var event = CommonApi.Event()
        event.communityId = "fit"
        event.payload = .communityUpdated(
            .with {
                $0.community = .with {
                    $0.communityId = "fit"
                    $0.version = 1
                    $0.settings = .with {
                        $0.mode = .oneWay
                        $0.dailyLikeLimit = 200
                        $0.attributeDefinitions = [
                            .with {
                                $0.key = "activities"
                                $0.attributeType = .multiChoice
                                $0.choices = Self.activities.map { value in .with { $0.value = value } }
                            }
                        ]
                    }
                }
            })
        try await h.deliver([event], from: "profile")
        try await h.community("dating")
    }

    static func start(_ h: MatchHarness, _ member: Member, _ activity: String = "", key: String = "")
        async throws -> MatchApi.StartActivityResponse
    {
        try await h.call(
            M.startActivity, .with {
                $0.activity = activity
                $0.idempotencyKey = key
            }, token: member.token)
    }

    /// The follower ids of every ActivityStarted in match's outbox, per event, oldest first.
    static func startedEvents(_ h: MatchHarness) async throws -> [CommonApi.ActivityStarted] {
        try await h.database.query("SELECT payload FROM events_outbox WHERE event_type = 'activity.started' ORDER BY id")
            .map { row in
                let event = try CommonApi.Event(serializedBytes: try row.decode([UInt8].self, at: 0))
                guard case .activityStarted(let started)? = event.payload else { throw CancellationError() }
                return started
            }
    }

    @Test func rulesDecideTheNotifyInterval() {
        let rules = ActivityRules(durationMs: 3_600_000, notifyIntervalMs: 10_000)
        #expect(rules.notifies(lastNotifiedUnixMs: nil, nowUnixMs: 100_000) == (true, 110_000))
        #expect(rules.notifies(lastNotifiedUnixMs: 95_000, nowUnixMs: 100_000) == (false, 105_000))
        #expect(rules.notifies(lastNotifiedUnixMs: 90_000, nowUnixMs: 100_000) == (true, 110_000), "the interval is over")
        let fitness = CommunitySettingsRow(
            mode: .oneWay, dailyLikeLimit: 200, undoWindowSeconds: 300, dailyUndoLimit: 3, activities: ["yoga"])
        #expect(rules.refusal(activity: "yoga", settings: fitness) == nil)
        #expect(rules.refusal(activity: "", settings: fitness) == nil)
        #expect(rules.refusal(activity: "chess", settings: fitness) == .unknownActivity)
        #expect(rules.refusal(activity: "", settings: .defaults) == .notAFollowCommunity)
    }

    @Test func followersAreToldOnceAndSeeItUntilItStops() async throws {
        try await MatchHarness.with { h in
            try await Self.communities(h)
            let m = try await h.members(5, community: "fit")
            let (athlete, fan, mutual, blocker, stranger) = (m[0], m[1], m[2], m[3], m[4])
            try await h.swipe(fan, athlete, .like)  // fan follows athlete
            try await h.swipe(mutual, athlete, .like)
            try await h.swipe(athlete, mutual, .like)  // followed back: mutual
            try await h.swipe(blocker, athlete, .like)
            try await h.call(M.block, .with { $0.targetUserId = athlete.id }, token: blocker.token)
            try await h.swipe(athlete, stranger, .like)  // athlete follows stranger: stranger is no follower

            let first = try await Self.start(h, athlete, "running", key: "start-1")
            #expect(first.followersNotified && !first.replayed)
            let b1 = try #require(first.broadcast)
            #expect(b1.activity == "running")
            #expect(b1.expiresUnixMs - b1.startedUnixMs == 7_200_000)
            var events = try await Self.startedEvents(h)
            #expect(events.count == 1)
            #expect(Set(events[0].followerUserIds) == [fan.id, mutual.id], "no blocker, no one the athlete follows")
            #expect(events[0].broadcastId == b1.broadcastId)

            // A retry replays; a second start within the interval shows but tells nobody.
            let retry = try await Self.start(h, athlete, "running", key: "start-1")
            #expect(retry.replayed && retry.broadcast?.broadcastId == b1.broadcastId && retry.followersNotified)
            let second = try await Self.start(h, athlete, "cycling", key: "start-2")
            #expect(!second.followersNotified && !second.replayed)
            let b2 = try #require(second.broadcast)
            #expect(second.nextNotifyUnixMs == b1.startedUnixMs + 10_800_000)
            events = try await Self.startedEvents(h)
            #expect(events.count == 1, "the interval holds")
            #expect(
                await h.code(M.startActivity, .with { $0.activity = "yoga"; $0.idempotencyKey = "start-1" }, token: athlete.token)
                    == .invalidArgument, "a key names one start")

            // Followers see the newest broadcast (the older one ended); others do not.
            let seen = try await h.call(M.listFollowedActivities, .init(), token: fan.token).broadcasts
            #expect(seen.map(\.broadcastId) == [b2.broadcastId])
            #expect(try await h.call(M.listFollowedActivities, .init(), token: mutual.token).broadcasts.count == 1)
            #expect(try await h.call(M.listFollowedActivities, .init(), token: blocker.token).broadcasts.isEmpty)
            #expect(try await h.call(M.listFollowedActivities, .init(), token: stranger.token).broadcasts.isEmpty)

            // A block either way hides it at once.
            try await h.call(M.block, .with { $0.targetUserId = athlete.id }, token: mutual.token)
            #expect(try await h.call(M.listFollowedActivities, .init(), token: mutual.token).broadcasts.isEmpty)

            let stopped = try await h.call(M.stopActivity, .init(), token: athlete.token)
            #expect(stopped.broadcastId == b2.broadcastId)
            #expect(try await h.call(M.stopActivity, .init(), token: athlete.token).broadcastId.isEmpty, "idempotent")
            #expect(try await h.call(M.listFollowedActivities, .init(), token: fan.token).broadcasts.isEmpty)
        }
    }

    @Test func aStartAfterTheIntervalTellsAgain() async throws {
        try await MatchHarness.with(settings: ["KINDRED_MATCH_ACTIVITY_NOTIFY_INTERVAL_MS": "6000"]) { h in
            try await Self.communities(h)
            let m = try await h.members(2, community: "fit")
            try await h.swipe(m[1], m[0], .like)
            #expect(try await Self.start(h, m[0]).followersNotified)
            let within = try await Self.start(h, m[0])
            #expect(!within.followersNotified)
            // Until the time the answer named (the machine's clock is the database's: one host in these tests).
            let wait = within.nextNotifyUnixMs - Int64(Date().timeIntervalSince1970 * 1000) + 50
            try await Task.sleep(for: .milliseconds(max(0, wait)))
            #expect(try await Self.start(h, m[0]).followersNotified)
            #expect(try await Self.startedEvents(h).count == 2)
        }
    }

    @Test func manyFollowersAreSplitIntoEventsOfAThousand() async throws {
        try await MatchHarness.with { h in
            try await Self.communities(h)
            let m = try await h.members(1202, community: "fit")
            let athlete = m[0]
            // Followers straight into the table (1201 follows through Swipe would only slow the test down).
            try await h.database.execute(
                """
                INSERT INTO matches (match_id, user_low, user_high, community_id, mode, initiator, created_at)
                SELECT gen_random_uuid(), least(f, \(athlete.id)::uuid), greatest(f, \(athlete.id)::uuid), 'fit', 2, f, now()
                FROM unnest(\(m.dropFirst().map(\.id))::uuid[]) AS f
                """)
            _ = try await Self.start(h, athlete)
            let events = try await Self.startedEvents(h)
            #expect(events.map(\.followerUserIds.count) == [1000, 201])
            #expect(Set(events.flatMap(\.followerUserIds)).count == 1201)
        }
    }

    @Test func refusedStartsChangeNothing() async throws {
        try await MatchHarness.with { h in
            try await Self.communities(h)
            let dating = try await h.members(1, community: "dating")[0]
            let fit = try await h.members(1, community: "fit")[0]
            let hidden = try await h.members(1, community: "fit", eligible: false)[0]
            #expect(await h.code(M.startActivity, .init(), token: dating.token) == .failedPrecondition)
            #expect(await h.code(M.startActivity, .with { $0.activity = "chess" }, token: fit.token) == .invalidArgument)
            #expect(
                await h.code(M.startActivity, .with { $0.activity = String(repeating: "a", count: 65) }, token: fit.token)
                    == .invalidArgument)
            #expect(await h.code(M.startActivity, .with { $0.idempotencyKey = "no spaces" }, token: fit.token) == .invalidArgument)
            #expect(await h.code(M.startActivity, .init(), token: hidden.token) == .failedPrecondition)
            #expect(
                try await h.database.query("SELECT count(*) FROM activity_broadcasts").scalar(Int64.self) == 0)
            #expect(await h.code(M.listFollowedActivities, .with { $0.pageSize = 51 }, token: fit.token) == .invalidArgument)
        }
    }

    /// Who sees a broadcast, and who is told of it, is the policy's `card` (``VisibilityPolicy``): a connection
    /// keeps seeing a paused member; a deactivated one is hidden until reactivated; a block either way hides it
    /// (here a block row beside a connection still active) and keeps the follower out of the events.
    @Test func followersSeeWhatThePolicyShows() async throws {
        try await MatchHarness.with { h in
            try await Self.communities(h)
            let m = try await h.members(3, community: "fit")
            let (athlete, fan, blocked) = (m[0], m[1], m[2])
            try await h.swipe(fan, athlete, .like)
            try await h.swipe(blocked, athlete, .like)
            try await h.database.execute(
                "INSERT INTO blocks (blocker, blocked, created_at) VALUES (\(athlete.id)::uuid, \(blocked.id)::uuid, now())")
            _ = try await Self.start(h, athlete, "yoga")
            #expect(try await Self.startedEvents(h).map(\.followerUserIds) == [[fan.id]])
            func seen(_ member: Member) async throws -> Int {
                try await h.call(M.listFollowedActivities, .init(), token: member.token).broadcasts.count
            }
            #expect(try await seen(fan) == 1)
            #expect(try await seen(blocked) == 0, "blocked by the broadcaster")

            try await h.deliver([h.profileEvent(athlete, eligible: false, version: 2)], from: "profile")
            #expect(try await seen(fan) == 1, "paused: a connection still sees the card")
            func account(_ payload: CommonApi.Event.Payload) -> CommonApi.Event {
                var event = CommonApi.Event()
                event.userId = athlete.id
                event.communityId = "fit"
                event.payload = payload
                return event
            }
            try await h.deliver([account(.accountDeactivated(.init()))], from: "auth")
            #expect(try await seen(fan) == 0, "deactivated")
            try await h.deliver([account(.accountReactivated(.init()))], from: "auth")
            #expect(try await seen(fan) == 1, "reactivated")
        }
    }

    @Test func deletionErasesBroadcasts() async throws {
        try await MatchHarness.with { h in
            try await Self.communities(h)
            let m = try await h.members(2, community: "fit")
            try await h.swipe(m[1], m[0], .like)
            _ = try await Self.start(h, m[0], "yoga")
            let footprint = try await h.call(
                M.getUserFootprint, .with { $0.userId = m[0].id }, token: testKeys.serviceToken("gateway"))
            #expect(footprint.counts.first { $0.kind == "activity_broadcasts" }?.rows == 1)
            var deleted = CommonApi.Event()
            deleted.userId = m[0].id
            deleted.communityId = "fit"
            deleted.payload = .accountDeleted(.init())
            try await h.deliver([deleted], from: "auth")
            let after = try await h.call(
                M.getUserFootprint, .with { $0.userId = m[0].id }, token: testKeys.serviceToken("gateway"))
            #expect(after.counts.allSatisfy { $0.rows == 0 })
            #expect(try await h.call(M.listFollowedActivities, .init(), token: m[1].token).broadcasts.isEmpty)
        }
    }
}
