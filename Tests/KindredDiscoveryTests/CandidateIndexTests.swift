import Testing
import KindredServiceKit

@testable import KindredDiscovery

@Suite("Candidate index")
struct CandidateIndexTests {
    static let today: Int32 = 2026_11_24

    static func member(
        _ n: UInt64, lat: Double = 52.52, lon: Double = 13.40, gender: UInt8 = 1, wants: UInt8 = 0b100,
        born: Int32 = 1996_01_01, ages: ClosedRange<UInt8> = 18...99, radius: UInt16 = 50,
        attributes: InterestSet = InterestSet()
    ) -> IndexedMember {
        IndexedMember(
            user: UserKey(high: 0, low: n), latitude: lat, longitude: lon, gender: gender, interestedIn: wants,
            birthDate: born, ageMin: ages.lowerBound, ageMax: ages.upperBound, radiusKm: radius, hideDistance: false,
            interests: InterestSet(), attributes: attributes, lastActiveMinutes: 0, joinedMinutes: 0
        )
    }

    static func key(_ n: UInt64) -> UserKey { UserKey(high: 0, low: n) }

    private func deck(_ index: CommunityIndex, _ viewer: UInt64, radius: Int? = nil, required: InterestSet = InterestSet()) -> Set<UInt64> {
        Set((index.candidates(for: Self.key(viewer), DeckQuery(limit: 100, radiusKm: radius, requiredAttributes: required, today: Self.today)) ?? []).map(\.user.low))
    }

    @Test("Loading swipes and blocks in bulk (a rebuild) gives the same index as recording them one by one")
    func bulkLoadEqualsOneByOne() {
        var random = SplitMix(state: 7)
        var single = CommunityIndex()
        for n in 1...60 { single.upsert(Self.member(UInt64(n), gender: UInt8(1 + n % 2), wants: 0)) }
        single.remove(Self.key(13))  // a freed slot: swipes naming it are ignored
        var bulk = single
        var swipes = SlotSwipes()
        var blocks: [(Int32, Int32)] = []
        for _ in 0..<400 {
            let (v, t) = (UInt64.random(in: 1...60, using: &random), UInt64.random(in: 1...60, using: &random))
            guard v != t else { continue }
            let liked = Bool.random(using: &random)
            single.recordSwipe(viewer: Self.key(v), target: Self.key(t), liked: liked)
            if let x = bulk.slot(of: Self.key(v)), let y = bulk.slot(of: Self.key(t)) { swipes.append(viewer: x, target: y, liked: liked) }
        }
        for _ in 0..<30 {
            let (a, b) = (UInt64.random(in: 1...60, using: &random), UInt64.random(in: 1...60, using: &random))
            guard a != b else { continue }
            single.block(Self.key(a), Self.key(b))
            if let x = bulk.slot(of: Self.key(a)), let y = bulk.slot(of: Self.key(b)) { blocks.append((x, y)) }
        }
        bulk.load(swipes: swipes, blocks: blocks)
        for v in 1...60 {
            #expect(deck(bulk, UInt64(v)) == deck(single, UInt64(v)))
            for t in 1...60 {
                #expect(bulk.hasSwiped(Self.key(UInt64(v)), Self.key(UInt64(t))) == single.hasSwiped(Self.key(UInt64(v)), Self.key(UInt64(t))))
                #expect(bulk.isBlocked(Self.key(UInt64(v)), Self.key(UInt64(t))) == single.isBlocked(Self.key(UInt64(v)), Self.key(UInt64(t))))
                #expect(bulk.isStillUnseen(viewer: Self.key(UInt64(v)), target: Self.key(UInt64(t)))
                    == single.isStillUnseen(viewer: Self.key(UInt64(v)), target: Self.key(UInt64(t))))
            }
        }
        // Undo and removal work on bulk-built lists as on the others.
        bulk.undoSwipe(viewer: Self.key(1), target: Self.key(2))
        single.undoSwipe(viewer: Self.key(1), target: Self.key(2))
        bulk.remove(Self.key(3))
        single.remove(Self.key(3))
        for v in 1...60 { #expect(deck(bulk, UInt64(v)) == deck(single, UInt64(v))) }
    }

    @Test("Compatibility is mutual: gender wishes, age ranges and radii both ways")
    func mutualCompatibility() {
        var index = CommunityIndex()
        index.upsert(Self.member(1, gender: 1, wants: 0b100, ages: 25...35))  // viewer: gender 1 wants gender 2
        index.upsert(Self.member(2, gender: 2, wants: 0b010))  // fits
        index.upsert(Self.member(3, gender: 1, wants: 0b010))  // wrong gender for the viewer
        index.upsert(Self.member(4, gender: 2, wants: 0b100))  // does not want the viewer's gender
        index.upsert(Self.member(5, gender: 2, wants: 0, born: 1980_01_01))  // too old for the viewer (46)
        index.upsert(Self.member(6, gender: 2, wants: 0, ages: 40...50))  // the viewer (30) too young for them
        index.upsert(Self.member(7, lat: 52.52, lon: 14.30, gender: 2, wants: 0, radius: 30))  // ~61 km: beyond both
        index.upsert(Self.member(8, lat: 52.52, lon: 13.90, gender: 2, wants: 0, radius: 10))  // ~34 km: beyond theirs
        #expect(deck(index, 1) == [2])
        #expect(deck(index, 1, radius: 100) == [2])  // a wider viewer radius does not override the candidate's
    }

    @Test("The radius filter and the shown distance agree: a member shown at r km is found with radius r", arguments: Array(1...30))
    func radiusMatchesShownDistance(radius: Int) {
        // Members every 100 m eastwards and southwards; each within the radius by its shown (rounded) distance must be found,
        // including those up to r + 0.5 km away in cells whose nearest point lies beyond r km.
        var index = CommunityIndex()
        index.upsert(Self.member(1, lat: 52.5201, lon: 13.4049, gender: 0, wants: 0, radius: 500))
        for n in 0..<Int(radius * 10 + 10) {
            let (east, north) = (Double(n) * 0.1 / 67.8, Double(n) * 0.1 / 111.2)
            index.upsert(Self.member(UInt64(2 * n + 2), lat: 52.5201, lon: 13.4049 + east, gender: 0, wants: 0, radius: 500))
            index.upsert(Self.member(UInt64(2 * n + 3), lat: 52.5201 - north, lon: 13.4049, gender: 0, wants: 0, radius: 500))
        }
        let all = index.candidates(for: Self.key(1), DeckQuery(limit: 10_000, radiusKm: radius + 10, today: Self.today, scanLimit: 1_000_000)) ?? []
        let within = Set(all.filter { $0.distanceKm <= radius }.map(\.user.low))
        #expect(!within.isEmpty)
        let found = index.candidates(for: Self.key(1), DeckQuery(limit: 10_000, radiusKm: radius, today: Self.today, scanLimit: 1_000_000)) ?? []
        #expect(Set(found.map(\.user.low)) == within)
    }

    @Test("Swiped, passed-on-viewer, blocked and removed members never appear")
    func exclusions() {
        var index = CommunityIndex()
        for n: UInt64 in 1...6 { index.upsert(Self.member(n, gender: 0, wants: 0)) }
        index.recordSwipe(viewer: Self.key(1), target: Self.key(2), liked: true)  // the viewer swiped 2
        index.recordSwipe(viewer: Self.key(3), target: Self.key(1), liked: false)  // 3 passed on the viewer
        index.recordSwipe(viewer: Self.key(4), target: Self.key(1), liked: true)  // 4 liked the viewer: stays
        index.block(Self.key(5), Self.key(1))
        #expect(deck(index, 1) == [4, 6])
        index.unblock(Self.key(1), Self.key(5))
        index.undoSwipe(viewer: Self.key(3), target: Self.key(1))
        index.remove(Self.key(6))
        #expect(deck(index, 1) == [3, 4, 5])
        #expect(index.candidates(for: Self.key(6), DeckQuery(limit: 10, today: Self.today)) == nil)
        // A slot freed by removal is reused without inheriting anything.
        index.upsert(Self.member(7, gender: 0, wants: 0))
        #expect(deck(index, 7) == [1, 2, 3, 4, 5])
    }

    @Test("A freed slot takes none of the likes its last member received", arguments: [false, true])
    func reusedSlotLosesReceivedLikes(loaded: Bool) {
        var index = CommunityIndex()
        for n: UInt64 in 1...4 { index.upsert(Self.member(n, gender: 0, wants: 0)) }
        let (liker, liked, passer) = (Self.key(1), Self.key(2), Self.key(3))
        if loaded {  // as a rebuild records them
            var swipes = SlotSwipes()
            swipes.append(viewer: index.slot(of: liker)!, target: index.slot(of: liked)!, liked: true)
            swipes.append(viewer: index.slot(of: passer)!, target: index.slot(of: liked)!, liked: false)
            index.load(swipes: swipes, blocks: [])
        } else {
            index.recordSwipe(viewer: liker, target: liked, liked: true)
            index.recordSwipe(viewer: passer, target: liked, liked: false)
        }
        #expect(deck(index, 1) == [3, 4])
        let freed = index.slot(of: liked)
        index.remove(liked)
        index.upsert(Self.member(5, gender: 0, wants: 0))
        #expect(index.slot(of: Self.key(5)) == freed)
        #expect(deck(index, 1) == [3, 4, 5])
        #expect(deck(index, 3) == [1, 4, 5])
        #expect(!index.hasSwiped(liker, Self.key(5)))
    }

    @Test("Attribute filters require every listed value")
    func attributeFilters() {
        var index = CommunityIndex()
        let fintech = IndexedMember.attributeBit(key: "business_field", value: "fintech")
        let investor = IndexedMember.attributeBit(key: "role", value: "investor")
        index.upsert(Self.member(1, gender: 0, wants: 0))
        index.upsert(Self.member(2, gender: 0, wants: 0, attributes: InterestSet(bits: fintech.bits | investor.bits)))
        index.upsert(Self.member(3, gender: 0, wants: 0, attributes: fintech))
        #expect(deck(index, 1, required: fintech) == [2, 3])
        #expect(deck(index, 1, required: InterestSet(bits: fintech.bits | investor.bits)) == [2])
    }

    @Test("The ring walk finds exactly the members a brute-force distance scan finds", arguments: [5, 20, 80, 300])
    func coveringMatchesBruteForce(radius: Int) {
        var index = CommunityIndex()
        var random = SystemRandomNumberGenerator()
        var members: [IndexedMember] = []
        for n in 1...600 {
            let member = Self.member(
                UInt64(n), lat: 60 + .random(in: -2...2, using: &random), lon: 25 + .random(in: -4...4, using: &random),
                gender: 0, wants: 0, radius: 500
            )
            members.append(member)
            index.upsert(member)
        }
        let viewer = members[0]
        let expected = Set(members.dropFirst().filter {
            Self.shownKilometres(viewer, $0) <= radius
        }.map(\.user.low))
        let found = index.candidates(for: viewer.user, DeckQuery(limit: 1000, radiusKm: radius, today: Self.today, scanLimit: .max)) ?? []
        #expect(Set(found.map(\.user.low)) == expected)
        for match in found {
            let other = members[Int(match.user.low) - 1]
            #expect(match.distanceKm == Self.shownKilometres(viewer, other))
        }
    }

    /// The distance members are shown between two indexed positions (`PublishedLocation`).
    static func shownKilometres(_ a: IndexedMember, _ b: IndexedMember) -> Int {
        PublishedLocation.kilometres(
            PublishedPoint(latitude: a.latitude, longitude: a.longitude),
            PublishedPoint(latitude: b.latitude, longitude: b.longitude))
    }

    @Test("Ranking puts the likelier match first; a member who already liked the viewer counts as liking back")
    func ranking() {
        var index = CommunityIndex()
        for n: UInt64 in 1...3 { index.upsert(Self.member(n, gender: 0, wants: 0)) }
        let pool = index.candidates(for: Self.key(1), DeckQuery(limit: 10, today: Self.today)) ?? []
        // Member 3 was liked by everyone who swiped on them (appeal), member 2 by nobody.
        var models = Recommender()
        var liked = MemberState()
        (liked.swipesReceived, liked.surplusReceived) = (20, 14)
        var passed = MemberState()
        (passed.swipesReceived, passed.surplusReceived) = (20, -6)
        models.setState(liked, of: Int(index.slot(of: Self.key(3))!))
        models.setState(passed, of: Int(index.slot(of: Self.key(2))!))
        let ranked = index.rank(pool, viewer: Self.key(1), recommender: models, nowMinutes: 0)
        #expect(ranked.map(\.match.user.low) == [3, 2])
        // Member 2 already liked the viewer: their side is known (1), so only the viewer's own P(like) counts.
        index.recordSwipe(viewer: Self.key(2), target: Self.key(1), liked: true)
        let reranked = index.rank(pool, viewer: Self.key(1), recommender: models, nowMinutes: 0)
        let score = { (ranking: [RankedCandidate], member: UInt64) in ranking.first { $0.match.user.low == member }!.score }
        #expect(score(reranked, 2) > 1.5 * score(ranked, 2))
        #expect(score(reranked, 3) == score(ranked, 3))
        // Of two members alike in every other way, the one who liked the viewer comes first.
        index.upsert(Self.member(4, gender: 0, wants: 0))
        index.upsert(Self.member(5, gender: 0, wants: 0))
        index.recordSwipe(viewer: Self.key(5), target: Self.key(1), liked: true)
        let alike = index.candidates(for: Self.key(1), DeckQuery(limit: 10, today: Self.today))!.filter { $0.user.low >= 4 }
        #expect(index.rank(alike, viewer: Self.key(1), recommender: models, nowMinutes: 0).map(\.match.user.low) == [5, 4])
        // A pass is not a like (and leaves the viewer's deck altogether).
        index.recordSwipe(viewer: Self.key(3), target: Self.key(1), liked: false)
        #expect(index.candidates(for: Self.key(1), DeckQuery(limit: 10, today: Self.today))?.map(\.user.low).sorted() == [2, 4, 5])
    }
}
