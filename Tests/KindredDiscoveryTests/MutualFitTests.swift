import Testing

@testable import KindredDiscovery

/// `MutualFit`, the one rule of who may be shown to whom: `couldShow` (what a swipe is checked against) asks it
/// directly, the deck's walk asks it per candidate, and both must always agree.
@Suite("Mutual fit")
struct MutualFitTests {
    typealias T = CandidateIndexTests
    static let today = CandidateIndexTests.today

    private func shown(_ index: CommunityIndex, _ target: UInt64, to viewer: UInt64, radius: Int = 50) -> Bool {
        index.couldShow(T.key(target), to: T.key(viewer), radiusKm: radius, today: Self.today)
    }

    @Test("Ages both ways, to the day")
    func ages() {
        var index = CommunityIndex()
        index.upsert(T.member(1, born: 1998_11_24, ages: 25...35))  // 28 today, wants 25..35
        index.upsert(T.member(2, gender: 2, wants: 0b010, born: 1976_11_24, ages: 50...99))  // 50 today, wants 50+
        index.upsert(T.member(3, gender: 2, wants: 0b010, born: 1990_11_25))  // 35 (36 tomorrow)
        index.upsert(T.member(4, gender: 2, wants: 0b010, born: 1990_11_24))  // 36 today
        index.upsert(T.member(5, gender: 2, wants: 0b010, born: 2001_11_25))  // 24 (25 tomorrow)
        index.upsert(T.member(6, gender: 2, wants: 0b010, born: 2001_11_24))  // 25 today
        #expect(!shown(index, 2, to: 1))  // the 28-year-old and the member who wants 50+ only
        #expect(!shown(index, 1, to: 2))
        #expect(shown(index, 3, to: 1) && !shown(index, 4, to: 1))
        #expect(!shown(index, 5, to: 1) && shown(index, 6, to: 1))
    }

    @Test("Genders both ways; 0 wants everyone")
    func genders() {
        var index = CommunityIndex()
        index.upsert(T.member(1, gender: 1, wants: 0b100))
        index.upsert(T.member(2, gender: 2, wants: 0b010))
        index.upsert(T.member(3, gender: 1, wants: 0b010))  // the viewer does not want gender 1
        index.upsert(T.member(4, gender: 2, wants: 0b100))  // does not want the viewer's gender
        index.upsert(T.member(5, gender: 2, wants: 0))
        index.upsert(T.member(6, gender: 3, wants: 0, born: 1990_01_01))
        #expect(shown(index, 2, to: 1) && !shown(index, 3, to: 1) && !shown(index, 4, to: 1) && shown(index, 5, to: 1))
        #expect(!shown(index, 6, to: 1))
        #expect(shown(index, 1, to: 5) && shown(index, 1, to: 2))
    }

    @Test("Radii both ways between the positions the index holds (the published ones); never oneself")
    func radii() {
        var index = CommunityIndex()
        index.upsert(T.member(1, gender: 1, wants: 0, radius: 50))
        index.upsert(T.member(2, lat: 52.52, lon: 14.30, gender: 1, wants: 0, radius: 160))  // ~61 km
        index.upsert(T.member(3, lat: 52.52, lon: 14.30, gender: 1, wants: 0, radius: 40))  // ~61 km, reaches 40
        index.upsert(T.member(4, lat: 45.46, lon: 9.19, gender: 1, wants: 0, radius: 1000))  // Milan, ~840 km
        #expect(!shown(index, 2, to: 1, radius: 50))
        #expect(shown(index, 2, to: 1, radius: 160))  // as far as the deck widens
        #expect(!shown(index, 3, to: 1, radius: 160))  // the viewer is beyond their radius
        #expect(!shown(index, 4, to: 1, radius: 160))
        #expect(!shown(index, 1, to: 1))
        #expect(!shown(index, 9, to: 1) && !shown(index, 1, to: 9))  // not indexed (ineligible, paused, unknown)
    }

    @Test("Swipes, passes and blocks change the deck but never what could be shown")
    func historyPlaysNoPart() {
        var index = CommunityIndex()
        for n in 1...4 { index.upsert(T.member(UInt64(n), gender: 1, wants: 0)) }
        index.recordSwipe(viewer: T.key(2), target: T.key(1), liked: false)  // 2 passed on 1
        index.recordSwipe(viewer: T.key(1), target: T.key(3), liked: true)
        index.block(T.key(1), T.key(4))
        #expect(index.candidates(for: T.key(1), DeckQuery(limit: 10, today: Self.today))?.isEmpty == true)
        for n in 2...4 { #expect(shown(index, UInt64(n), to: 1)) }
    }

    @Test("couldShow is exactly the deck's compatibility, for every pair of a random population", arguments: [50, 160])
    func agreesWithTheDeck(radius: Int) {
        var random = SplitMix(state: UInt64(radius))
        var index = CommunityIndex()
        for n in 1...300 {
            let youngest = UInt8.random(in: 18...40, using: &random)
            index.upsert(
                T.member(
                    UInt64(n),
                    lat: 52.0 + Double.random(in: 0...1.5, using: &random),
                    lon: 13.0 + Double.random(in: 0...2.5, using: &random),
                    gender: UInt8.random(in: 0...3, using: &random),
                    wants: UInt8.random(in: 0...15, using: &random) & 0b1110,
                    born: Int32.random(in: 1960...2007, using: &random) * 10000 + 1_01 + Int32.random(
                        in: 0...11,
                        using: &random
                    ) * 100,
                    ages: youngest...max(youngest, UInt8.random(in: 30...70, using: &random)),
                    radius: UInt16.random(in: 5...160, using: &random)
                )
            )
        }
        for v in 1...300 {
            let viewer = T.key(UInt64(v))
            let deck = Set(
                (index.candidates(
                    for: viewer,
                    DeckQuery(limit: 1000, radiusKm: radius, today: Self.today, scanLimit: 1000, includeSwiped: true)
                ) ?? [])
                .map(\.user.low)
            )
            for t in 1...300 {
                #expect(shown(index, UInt64(t), to: UInt64(v), radius: radius) == deck.contains(UInt64(t)))
            }
        }
    }
}
