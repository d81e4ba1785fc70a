import Foundation
import KindredDiscovery
import KindredGRPC
import KindredProto
import KindredServiceKit
import Testing

/// `CheckCandidates` against the real server: what match asks before it accepts a swipe, and (card mode,
/// `include_likers`) what profile asks before it shows a card.
@Suite("Candidate check", .serialized)
struct CandidateCheckTests {
    static let match = testKeys.serviceToken("match")

    static let profile = testKeys.serviceToken("profile")

    func check(
        _ harness: DiscoveryHarness, _ viewer: Member, _ targets: [String], cards: Bool = false
    ) async throws -> Set<String> {
        var request = DiscoveryApi.CheckCandidatesRequest()
        request.viewerUserId = viewer.id
        request.targetUserIds = targets
        request.includeLikers = cards
        let token = cards ? Self.profile : Self.match
        return Set(try await harness.call(D.checkCandidates, request, token: token).shownUserIds)
    }

    @Test("Card mode: the deck's predicate, plus the members who liked the viewer")
    func cardMode() async throws {
        try await DiscoveryHarness.with { harness in
            let scene = DiscoveryServiceTests.Scene()
            var faraway = Member(gender: .man, interestedIn: [.woman], birthYear: 1992, radiusKm: 1000)
            (faraway.latitude, faraway.longitude) = scene.viewer.east(900)
            var wantsFifty = Member(gender: .man, interestedIn: [.woman], birthYear: 1970, ageMin: 50, ageMax: 99)
            wantsFifty.ageMin = 50
            var elsewhere = Member(community: "bizmatch", gender: .man, interestedIn: [.woman], birthYear: 1992)
            elsewhere.latitude = scene.viewer.latitude
            try await harness.community()
            try await harness.community("bizmatch")
            try await harness.publish(scene.everyone + [faraway, wantsFifty, elsewhere])
            let outside = [faraway.id, wantsFifty.id, elsewhere.id]
            let all = scene.nearIDs.sorted() + outside
            // Without likes, card mode is the deck's predicate.
            #expect(try await check(harness, scene.viewer, all, cards: true) == scene.nearIDs)
            // Faraway liked the viewer (before the preferences parted them): his card shows in her likes received,
            // in card mode only. A pass (wantsFifty) is no like.
            try await harness.swipe(faraway, scene.viewer, like: true)
            try await harness.swipe(wantsFifty, scene.viewer, like: false)
            #expect(try await check(harness, scene.viewer, all, cards: true) == scene.nearIDs.union([faraway.id]))
            #expect(try await check(harness, scene.viewer, all) == scene.nearIDs, "swipes play no part in match's mode")
            // A like of someone else is not a like of the viewer.
            #expect(try await check(harness, faraway, [scene.viewer.id, scene.near[0].id], cards: true) == [])
            // The like stands whatever the viewer answered (her pass is hers to know).
            try await harness.swipe(scene.viewer, faraway, like: false)
            #expect(try await check(harness, scene.viewer, all, cards: true) == scene.nearIDs.union([faraway.id]))
        }
    }

    @Test("Lists exactly the members the deck could show, as far as it widens, whatever anyone swiped or blocked")
    func deckPredicate() async throws {
        try await DiscoveryHarness.with { harness in
            let scene = DiscoveryServiceTests.Scene()
            var wantsFifty = Member(gender: .man, interestedIn: [.woman], birthYear: 1970, ageMin: 50, ageMax: 99)
            wantsFifty.ageMin = 50  // the viewer (31) is too young for him; he (56) is too old for her
            var widened = Member(gender: .man, interestedIn: [.woman], birthYear: 1992, radiusKm: 160)
            (widened.latitude, widened.longitude) = scene.viewer.east(120)  // beyond her 50 km, within the deck's 160
            var faraway = Member(gender: .man, interestedIn: [.woman], birthYear: 1992, radiusKm: 1000)
            (faraway.latitude, faraway.longitude) = scene.viewer.east(900)
            var elsewhere = Member(community: "bizmatch", gender: .man, interestedIn: [.woman], birthYear: 1992)
            elsewhere.latitude = scene.viewer.latitude
            try await harness.community()
            try await harness.community("bizmatch")
            try await harness.publish(scene.everyone + [wantsFifty, widened, faraway, elsewhere])
            let unknown = try UUIDv7.generate()
            let all = scene.everyone.map(\.id) + [wantsFifty.id, widened.id, faraway.id, elsewhere.id, unknown]
            #expect(try await check(harness, scene.viewer, all) == scene.nearIDs.union([widened.id]))
            // Passes on the viewer, her swipes and blocks either way hide people from her deck, never from this.
            let (passer, liked, blocker) = (scene.near[0], scene.near[1], scene.near[2])
            try await harness.swipe(passer, scene.viewer, like: false)
            try await harness.swipe(scene.viewer, liked, like: true)
            try await harness.matchEvent(blocker, .userBlocked(.with { $0.blockedUserId = scene.viewer.id }))
            #expect(!(try await harness.deckIDs(scene.viewer)).contains(passer.id))
            #expect(
                try await check(harness, scene.viewer, [passer.id, liked.id, blocker.id]) == [
                    passer.id, liked.id, blocker.id,
                ]
            )
            // Pausing (an ineligible snapshot) takes a member out; a viewer who is not indexed sees no one.
            var paused = scene.near[3]
            paused.eligible = false
            paused.version = 2
            try await harness.publish([paused])
            #expect(try await check(harness, scene.viewer, [paused.id]).isEmpty)
            #expect(try await check(harness, scene.ineligible, [scene.near[4].id]).isEmpty)
        }
    }

    @Test("Distances are between published positions, as the deck measures them")
    func publishedPositions() async throws {
        try await DiscoveryHarness.with { harness in
            // The deck of a viewer with a 10 km radius widens to the community's maximum, 50 km.
            try await harness.community(maxRadiusKm: 50)
            let viewer = Member(gender: .woman, interestedIn: [.man], birthYear: 1995, radiusKm: 10)
            // Men 47-53 km east by their cells: whether each is shown follows the published distance.
            var men: [Member] = []
            for step in 0..<36 {
                var man = Member(gender: .man, interestedIn: [.woman], birthYear: 1992, radiusKm: 160)
                (man.latitude, man.longitude) = viewer.east(47 + Double(step) / 6)
                men.append(man)
            }
            try await harness.publish([viewer] + men)
            func within(_ km: Int, _ published: Bool) -> Set<String> {
                Set(
                    men.filter { man in
                        if published {
                            let (a, b) = (viewer.published, man.published)
                            return PublishedLocation.kilometres(
                                PublishedPoint(latitude: a.latitude, longitude: a.longitude),
                                PublishedPoint(latitude: b.latitude, longitude: b.longitude)) <= km
                        }
                        return man.longitude <= viewer.east(Double(km)).1
                    }.map(\.id)
                )
            }
            let shown = try await check(harness, viewer, men.map(\.id))
            #expect(shown == within(50, true))
            #expect(shown != within(50, false))  // the secret offsets moved someone across the line
            #expect(!shown.isEmpty && shown.count < men.count)
        }
    }

    @Test("Only match and profile may ask; bad input is refused")
    func callers() async throws {
        try await DiscoveryHarness.with { harness in
            let scene = DiscoveryServiceTests.Scene()
            try await harness.community()
            try await harness.publish(scene.everyone)
            var request = DiscoveryApi.CheckCandidatesRequest()
            request.viewerUserId = scene.viewer.id
            request.targetUserIds = [scene.near[0].id]
            #expect(
                try await harness.call(D.checkCandidates, request, token: Self.match).shownUserIds == [scene.near[0].id]
            )
            #expect(
                try await harness.call(D.checkCandidates, request, token: Self.profile).shownUserIds
                    == [scene.near[0].id]
            )
            #expect(await harness.failure(D.checkCandidates, request, token: scene.viewer.token) == .permissionDenied)
            #expect(
                await harness.failure(D.checkCandidates, request, token: DiscoveryHarness.admin) == .permissionDenied
            )
            #expect(
                await harness.failure(D.checkCandidates, request, token: testKeys.serviceToken("gateway"))
                    == .permissionDenied
            )
            #expect(await harness.failure(D.checkCandidates, request, token: "not-a-token") == .unauthenticated)
            var bad = request
            bad.targetUserIds = []
            #expect(await harness.failure(D.checkCandidates, bad, token: Self.match) == .invalidArgument)
            bad.targetUserIds = (0...100).map { _ in try! UUIDv7.generate() }
            #expect(await harness.failure(D.checkCandidates, bad, token: Self.match) == .invalidArgument)
            bad.targetUserIds = ["not-a-user"]
            #expect(await harness.failure(D.checkCandidates, bad, token: Self.match) == .invalidArgument)
            bad = request
            bad.viewerUserId = ""
            #expect(await harness.failure(D.checkCandidates, bad, token: Self.match) == .invalidArgument)
        }
    }
}
