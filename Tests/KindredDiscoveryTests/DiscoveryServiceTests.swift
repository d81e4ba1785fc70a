import Foundation
import KindredDiscovery
import KindredGRPC
import KindredProto
import KindredServiceKit
import Testing

/// The discovery server against real PostgreSQL, fed through DeliverEvents the way profile, auth and match feed
/// it: decks, exclusions, blocks, account events, rebuilds, paging, widening and who may ask for what.
@Suite("Discovery service", .serialized)
struct DiscoveryServiceTests {
    /// A viewer (a woman looking for men 25..40 within 50 km in Berlin) and people around her.
    struct Scene {
        var viewer = Member(gender: .woman, interestedIn: [.man], birthYear: 1995, ageMin: 25, ageMax: 40)
        var near: [Member] = []
        var far = Member()
        var wrongGender = Member()
        var tooOld = Member()
        var notInterested = Member()
        var ineligible = Member()

        init() {
            for km in [2.0, 5, 9, 14, 20] {
                var man = Member(gender: .man, interestedIn: [.woman], birthYear: 1992)
                (man.latitude, man.longitude) = self.viewer.east(km)
                self.near.append(man)
            }
            self.far = Member(gender: .man, interestedIn: [.woman], birthYear: 1992)
            (self.far.latitude, self.far.longitude) = self.viewer.east(120)
            self.wrongGender = Member(gender: .woman, interestedIn: [.woman], birthYear: 1992)
            self.tooOld = Member(gender: .man, interestedIn: [.woman], birthYear: 1970)
            self.notInterested = Member(gender: .man, interestedIn: [.man], birthYear: 1992)
            self.ineligible = Member(gender: .man, interestedIn: [.woman], birthYear: 1992, eligible: false)
        }

        var everyone: [Member] { [self.viewer] + self.near + [self.far, self.wrongGender, self.tooOld, self.notInterested, self.ineligible] }
        var nearIDs: Set<String> { Set(self.near.map(\.id)) }
    }

    @Test("Events become a deck of compatible nearby members, ranked, at coarse whole-km distances")
    func eventsToDeck() async throws {
        try await DiscoveryHarness.with { harness in
            let scene = Scene()
            try await harness.community()
            try await harness.publish(scene.everyone)
            let deck = try await harness.deck(scene.viewer)
            #expect(Set(deck.map(\.userId)) == scene.nearIDs)
            #expect(deck.map(\.score) == deck.map(\.score).sorted(by: >))
            for candidate in deck {
                let member = scene.near.first { $0.id == candidate.userId }!
                // Between the published centres (each cell moved by its member's secret offset, `LocationOffset`).
                let (a, b) = (scene.viewer.published, member.published)
                let shown = PublishedLocation.kilometres(
                    PublishedPoint(latitude: a.latitude, longitude: a.longitude),
                    PublishedPoint(latitude: b.latitude, longitude: b.longitude))
                #expect(candidate.distanceKm == Int32(shown))
                #expect(candidate.distanceKm >= 1)
            }
            let picks = try await harness.call(D.getRecommendations, .init(), token: scene.viewer.token)
            #expect(picks.candidates.count == 3)
            #expect(picks.candidates.map(\.userId) == Array(deck.prefix(3).map(\.userId)))
        }
    }

    @Test("Swipes, passes on the viewer, undo, blocks either way and ended matches keep people out of the deck")
    func exclusions() async throws {
        try await DiscoveryHarness.with { harness in
            let scene = Scene()
            try await harness.community()
            try await harness.publish(scene.everyone)
            let (liked, passer, blocked, blocker, ended) = (scene.near[0], scene.near[1], scene.near[2], scene.near[3], scene.near[4])
            try await harness.swipe(scene.viewer, liked, like: true)
            let pass = try await harness.swipe(passer, scene.viewer, like: false)
            try await harness.matchEvent(scene.viewer, .userBlocked(.with { $0.blockedUserId = blocked.id }))
            try await harness.matchEvent(blocker, .userBlocked(.with { $0.blockedUserId = scene.viewer.id }))
            try await harness.matchEvent(
                scene.viewer, .matchEnded(.with { $0.userIds = [scene.viewer.id, ended.id].sorted(); $0.reason = .unmatched }))
            #expect(try await harness.deckIDs(scene.viewer).isEmpty)
            // The passer swiped the viewer, so the viewer is not in their deck either.
            #expect(!(try await harness.deckIDs(passer).contains(scene.viewer.id)))
            // Search shows whom the viewer swiped and who passed on them (a pass is never visible to the one passed
            // on: only the deck leaves them out), never a block either way or an ended match.
            #expect(Set(try await harness.search(scene.viewer).map(\.userId)) == [liked.id, passer.id])
            // Undo of the pass and lifting the viewer's block bring them back; the other side's block stays.
            try await harness.matchEvent(passer, .swipeUndone(.with { $0.swipeId = pass; $0.targetUserId = scene.viewer.id }))
            try await harness.matchEvent(scene.viewer, .userUnblocked(.with { $0.unblockedUserId = blocked.id }))
            try await harness.matchEvent(scene.viewer, .userUnblocked(.with { $0.unblockedUserId = blocker.id }))
            #expect(try await harness.deckIDs(scene.viewer) == [passer.id, blocked.id])
            // A redelivered event (same id) does nothing more.
            #expect(try await harness.footprint(scene.viewer)["exclusions"] == 2)
        }
    }

    @Test("A batch of events is one transaction; later events see earlier ones; a failed partition waits alone")
    func eventBatches() async throws {
        try await DiscoveryHarness.with { harness in
            let scene = Scene()
            try await harness.community()
            try await harness.publish(scene.everyone)
            let (liked, other) = (scene.near[0], scene.near[1])
            try await harness.swipe(scene.viewer, liked, like: true)
            func event(_ user: String, _ payload: CommonApi.Event.Payload, id: String? = nil) throws -> CommonApi.Event {
                var event = CommonApi.Event()
                event.eventId = try id ?? UUIDv7.generate()
                event.userId = user
                event.communityId = "dating"
                event.payload = payload
                return event
            }
            // Deactivated and reactivated in one batch: the viewer comes back with their swipes (read from
            // PostgreSQL because the batch's earlier event took them out). `other`'s partition stops at an event
            // whose id cannot be recorded; the event after it waits for redelivery.
            let batch = [
                try event(scene.viewer.id, .accountDeactivated(.init())),
                try event(other.id, .accountDeactivated(.init()), id: "not-a-uuid"),
                try event(other.id, .accountDeactivated(.init())),
                try event(scene.viewer.id, .accountReactivated(.init())),
            ]
            let acknowledged = try await harness.deliver(batch, from: "auth")
            #expect(acknowledged == [batch[0].eventId, batch[3].eventId])
            #expect(try await harness.deckIDs(scene.viewer) == scene.nearIDs.subtracting([liked.id]))
            #expect(try await harness.deckIDs(other).contains(scene.viewer.id))
            // One transaction: every event of the batch was recorded at the same transaction time.
            let times = try await harness.database.query(
                "SELECT count(DISTINCT processed_at) FROM discovery.events_inbox WHERE event_id = ANY(\([batch[0].eventId, batch[3].eventId])::uuid[])")
            #expect(try times.scalar(Int64.self) == 1)
        }
    }

    @Test("Deactivation hides a member until reactivation; deletion erases every row (footprint zero)")
    func accountEvents() async throws {
        try await DiscoveryHarness.with { harness in
            let scene = Scene()
            try await harness.community()
            try await harness.publish(scene.everyone)
            let member = scene.near[0]
            try await harness.swipe(scene.viewer, scene.near[1], like: true)
            try await harness.swipe(member, scene.viewer, like: true)
            try await harness.matchEvent(member, .userBlocked(.with { $0.blockedUserId = scene.near[2].id }))
            try await harness.accountEvent(member, .accountDeactivated(.init()))
            #expect(!(try await harness.deckIDs(scene.viewer).contains(member.id)))
            #expect(await harness.failure(D.getDeck, .init(), token: member.token) == .failedPrecondition)
            try await harness.accountEvent(member, .accountReactivated(.init()))
            #expect(try await harness.deckIDs(scene.viewer).contains(member.id))
            // Back with their swipes: the viewer they liked is still not in their deck.
            #expect(!(try await harness.deckIDs(member).contains(scene.viewer.id)))
            #expect(try await harness.footprint(member) == ["candidates": 1, "swipe_features": 1, "exclusions": 1])
            try await harness.accountEvent(member, .accountDeleted(.with { $0.requestedByUser = true }))
            #expect(try await harness.footprint(member) == ["candidates": 0, "swipe_features": 0, "exclusions": 0])
            #expect(!(try await harness.deckIDs(scene.viewer).contains(member.id)))
            // An older snapshot arriving late does not resurrect anything it should not: it is a new row, version 1.
            #expect(try await harness.footprint(scene.viewer)["swipe_features"] == 1)
        }
    }

    @Test("A rebuild from PostgreSQL gives the same decks, searches and models as the incremental state")
    func rebuildEqualsIncremental() async throws {
        // Pages of 7 rows: the rebuild's keyset paging crosses many page boundaries.
        try await DiscoveryHarness.with(settings: ["KINDRED_DISCOVERY_REBUILD_PAGE": "7"]) { harness in
            let scene = Scene()
            var others: [Member] = []
            for i in 0..<20 {
                var member = Member(
                    gender: i % 2 == 0 ? .man : .woman, interestedIn: i % 2 == 0 ? [.woman] : [.man],
                    birthYear: 1985 + Int32(i % 10))
                (member.latitude, member.longitude) = scene.viewer.east(Double(i) * 1.7 + 1)
                others.append(member)
            }
            let everyone = scene.everyone + others
            try await harness.community()
            try await harness.publish(everyone)
            var random = SystemRandomNumberGenerator()
            for (i, swiper) in everyone.enumerated() where i % 3 != 2 {
                for target in everyone.shuffled(using: &random).prefix(6) where target.id != swiper.id {
                    try await harness.swipe(swiper, target, like: Bool.random(using: &random))
                }
            }
            try await harness.matchEvent(others[0], .userBlocked(.with { $0.blockedUserId = others[1].id }))
            try await harness.accountEvent(others[2], .accountDeactivated(.init()))
            func snapshot() async throws -> [String: [String]] {
                var state: [String: [String]] = [:]
                for member in everyone where member.eligible && member.id != others[2].id {
                    state["deck " + member.id] = try await harness.deck(member).map(\.userId).sorted()
                    state["search " + member.id] = try await harness.search(member).map { "\($0.userId)@\($0.distanceKm)" }
                }
                return state
            }
            let incremental = try await snapshot()
            let weights = harness.server.server.service.index.read("dating") { state in
                everyone.map { state.modelForTests($0.key) }
            }
            let rebuilt = try await harness.call(D.rebuildIndex, .init(), token: DiscoveryHarness.admin)
            #expect(rebuilt.indexedCandidates == Int64(everyone.count - 2))
            #expect(try await snapshot() == incremental)
            let weightsAfter = harness.server.server.service.index.read("dating") { state in
                everyone.map { state.modelForTests($0.key) }
            }
            #expect(weights?.map { $0.0 } == weightsAfter?.map { $0.0 })
            #expect(weights?.map { $0.1 } == weightsAfter?.map { $0.1 })
            #expect(weights?.contains { ($0.0?.swipesGiven ?? 0) > 0 } == true)
        }
    }

    @Test("Pages never repeat, and a dry deck is widened up to the community's maximum and says so")
    func pagingAndWidening() async throws {
        // Radii in exact steps: plain cell centres (the published offset would move members across the steps).
        try await DiscoveryHarness.with(settings: ["KINDRED_TEST_PLAIN_CELLS": "1"]) { harness in
            var viewer = Member(gender: .man, interestedIn: [.woman], radiusKm: 5)
            viewer.radiusKm = 5
            var women: [Member] = []
            for i in 0..<30 {
                var woman = Member(gender: .woman, interestedIn: [.man], radiusKm: 100)
                (woman.latitude, woman.longitude) = viewer.east(30 + Double(i))
                women.append(woman)
            }
            try await harness.community(maxRadiusKm: 80)
            try await harness.publish([viewer] + women)
            var request = DiscoveryApi.GetDeckRequest()
            request.pageSize = 7
            var seen: [String] = []
            var first = true
            repeat {
                let page = try await harness.call(D.getDeck, request, token: viewer.token)
                #expect(page.widened)
                #expect(page.radiusKm == 80)
                if first {
                    // Swiping someone of a later page meanwhile takes them out of it.
                    try await harness.swipe(viewer, women[29], like: false)
                    first = false
                }
                seen += page.candidates.map(\.userId)
                request.pageToken = page.nextPageToken
            } while !request.pageToken.isEmpty
            #expect(Set(seen).count == seen.count)
            #expect(Set(seen) == Set(women.map(\.id)).subtracting(seen.first == women[29].id ? [] : [women[29].id]))
            // Within the viewer's own radius nothing is widened.
            var near = Member(gender: .woman, interestedIn: [.man])
            (near.latitude, near.longitude) = viewer.east(1)
            var neighbours = [near]
            for i in 0..<25 {
                var woman = Member(gender: .woman, interestedIn: [.man])
                (woman.latitude, woman.longitude) = viewer.east(Double(i % 4) + 0.5)
                neighbours.append(woman)
            }
            try await harness.publish(neighbours)
            let page = try await harness.call(D.getDeck, .init(), token: viewer.token)
            #expect(!page.widened)
            #expect(page.radiusKm == 5)
        }
    }

    @Test("Callers act only as themselves: deck tokens, viewers, index calls and events are checked")
    func authorisation() async throws {
        try await DiscoveryHarness.with { harness in
            let scene = Scene()
            try await harness.community()
            try await harness.publish(scene.everyone)
            let other = scene.near[0]
            // A user cannot ask for another viewer's deck, picks or search.
            var deck = DiscoveryApi.GetDeckRequest()
            deck.viewerUserId = other.id
            #expect(await harness.failure(D.getDeck, deck, token: scene.viewer.token) == .permissionDenied)
            var picks = DiscoveryApi.GetRecommendationsRequest()
            picks.viewerUserId = other.id
            #expect(await harness.failure(D.getRecommendations, picks, token: scene.viewer.token) == .permissionDenied)
            var search = DiscoveryApi.SearchMembersRequest()
            search.viewerUserId = other.id
            #expect(await harness.failure(D.searchMembers, search, token: scene.viewer.token) == .permissionDenied)
            // The gateway names viewers; another service may not.
            #expect(try await harness.call(D.getDeck, deck, token: testKeys.serviceToken("gateway")).candidates.count > 0)
            #expect(await harness.failure(D.getDeck, deck, token: testKeys.serviceToken("chat")) == .permissionDenied)
            #expect(await harness.failure(D.getDeck, .init(), token: "not-a-token") == .unauthenticated)
            // A deck token is its viewer's only.
            var small = DiscoveryApi.GetDeckRequest()
            small.pageSize = 1
            let page = try await harness.call(D.getDeck, small, token: scene.viewer.token)
            small.pageToken = page.nextPageToken
            #expect(!small.pageToken.isEmpty)
            #expect(await harness.failure(D.getDeck, small, token: other.token) == .invalidArgument)
            #expect(try await harness.call(D.getDeck, small, token: scene.viewer.token).candidates.count == 1)
            // Index calls, rebuilds, footprints and events are not for users.
            var index = DiscoveryApi.IndexCandidateRequest()
            index.snapshot = scene.viewer.snapshot
            #expect(await harness.failure(D.indexCandidate, index, token: scene.viewer.token) == .permissionDenied)
            var remove = DiscoveryApi.RemoveCandidateRequest()
            remove.userId = other.id
            #expect(await harness.failure(D.removeCandidate, remove, token: scene.viewer.token) == .permissionDenied)
            #expect(await harness.failure(D.rebuildIndex, .init(), token: scene.viewer.token) == .permissionDenied)
            var footprint = Kindred.Common.V1.GetUserFootprintRequest()
            footprint.userId = other.id
            #expect(await harness.failure(D.getUserFootprint, footprint, token: scene.viewer.token) == .permissionDenied)
            var events = CommonApi.DeliverEventsRequest()
            events.events = [.with {
                $0.eventId = try! UUIDv7.generate()
                $0.producer = "match"
                $0.userId = other.id
                $0.payload = .userBlocked(.with { $0.blockedUserId = scene.viewer.id })
            }]
            #expect(await harness.failure(D.deliverEvents, events, token: scene.viewer.token) == .permissionDenied)
            // A service cannot pass its events off as another's.
            #expect(await harness.failure(D.deliverEvents, events, token: testKeys.serviceToken("profile")) == .invalidArgument)
            // A batch of more than 100 events is refused whole, before any effect.
            var tooMany = events
            tooMany.events += (0..<100).map { _ in
                var event = events.events[0]
                event.eventId = try! UUIDv7.generate()
                return event
            }
            #expect(await harness.failure(D.deliverEvents, tooMany, token: testKeys.serviceToken("match")) == .invalidArgument)
            #expect(try await harness.deckIDs(scene.viewer).contains(other.id))
            // Bad input changes nothing.
            deck.viewerUserId = ""
            deck.pageSize = 51
            #expect(await harness.failure(D.getDeck, deck, token: scene.viewer.token) == .invalidArgument)
            var filtered = DiscoveryApi.GetDeckRequest()
            filtered.attributeFilters = [.with { $0.key = "unknown"; $0.condition = .boolEquals(true) }]
            #expect(await harness.failure(D.getDeck, filtered, token: scene.viewer.token) == .invalidArgument)
            // An admin removes a candidate; IndexCandidate from profile brings a newer version back.
            #expect(try await harness.call(D.removeCandidate, remove, token: DiscoveryHarness.admin).removed)
            #expect(!(try await harness.deckIDs(scene.viewer).contains(other.id)))
            var back = other
            back.version = 2
            index.snapshot = back.snapshot
            #expect(try await harness.call(D.indexCandidate, index, token: testKeys.serviceToken("profile")).applied)
            #expect(!(try await harness.call(D.indexCandidate, index, token: testKeys.serviceToken("profile")).applied))
            #expect(try await harness.deckIDs(scene.viewer).contains(other.id))
        }
    }

    @Test("Each viewer has a call budget, whoever calls for them")
    func viewerBudget() async throws {
        try await DiscoveryHarness.with(settings: ["KINDRED_DISCOVERY_VIEWER_RATE": "0.01", "KINDRED_DISCOVERY_VIEWER_BURST": "3"]) {
            harness in
            let scene = Scene()
            try await harness.community()
            try await harness.publish(scene.everyone)
            for _ in 0..<3 { _ = try await harness.call(D.searchMembers, .init(), token: scene.viewer.token) }
            #expect(await harness.failure(D.getDeck, .init(), token: scene.viewer.token) == .resourceExhausted)
            var named = DiscoveryApi.GetDeckRequest()
            named.viewerUserId = scene.viewer.id
            #expect(await harness.failure(D.getDeck, named, token: testKeys.serviceToken("gateway")) == .resourceExhausted)
            // Another viewer is not affected.
            #expect(try await harness.call(D.getDeck, .init(), token: scene.near[0].token).candidates.count >= 1)
        }
    }

    @Test("Attribute filters and text search use the community's filterable attributes")
    func filters() async throws {
        // Results in nearest-first order at the members' given places: plain cell centres (with the published
        // offset the order would depend on each random id's offset).
        try await DiscoveryHarness.with(settings: ["KINDRED_TEST_PLAIN_CELLS": "1"]) { harness in
            let field = CommonApi.AttributeDefinition.with {
                $0.key = "field"
                $0.attributeType = .singleChoice
                $0.choices = ["fintech", "health"].map { value in .with { $0.value = value; $0.label = value } }
                $0.filterable = true
                $0.rankingFeature = true
            }
            let pitch = CommonApi.AttributeDefinition.with {
                $0.key = "pitch"
                $0.attributeType = .text
                $0.filterable = true
            }
            try await harness.community("biz", attributes: [field, pitch])
            func founder(_ value: String, _ text: String, km: Double) -> Member {
                var member = Member(community: "biz", gender: .unspecified, interestedIn: [])
                member.longitude += km / 68
                member.attributes = [
                    .with { $0.key = "field"; $0.value = .choiceValue(value) },
                    .with { $0.key = "pitch"; $0.value = .textValue(text) },
                ]
                return member
            }
            let investor = founder("fintech", "Angel investor", km: 0)
            let a = founder("fintech", "Payments for dog walkers", km: 3)
            let b = founder("health", "Dog health tracker", km: 1)
            let c = founder("fintech", "Ledger tooling", km: 8)
            try await harness.publish([investor, a, b, c])
            let fintech = try await harness.search(investor) {
                $0.attributeFilters = [.with { $0.key = "field"; $0.condition = .anyOf(.with { $0.values = ["fintech"] }) }]
            }
            #expect(fintech.map(\.userId) == [a.id, c.id])
            #expect(fintech.first?.sharedAttributeKeys == ["field"])
            let dogs = try await harness.search(investor) { $0.query = "DOG" }
            #expect(dogs.map(\.userId) == [b.id, a.id])
            let paged = try await harness.search(investor) { $0.pageSize = 1 }
            #expect(paged.map(\.userId) == [b.id, a.id, c.id])
            var wrongType = DiscoveryApi.SearchMembersRequest()
            wrongType.attributeFilters = [.with { $0.key = "field"; $0.condition = .boolEquals(true) }]
            #expect(await harness.failure(D.searchMembers, wrongType, token: investor.token) == .invalidArgument)
        }
    }
}
