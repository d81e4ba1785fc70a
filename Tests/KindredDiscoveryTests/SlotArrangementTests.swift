import Foundation
import Testing

@testable import KindredDiscovery

/// A rebuild renumbers the index's slots by place (issue 12, deck speed): decks, swipes, blocks and the per-slot
/// model summaries must come out exactly as before, and each cell's members must sit in neighbouring slots.
@Suite("Slots by place")
struct SlotArrangementTests {
    static let cities: [(Double, Double)] = [(52.52, 13.40), (48.85, 2.35), (40.42, -3.70), (-33.87, 151.21)]

    /// 400 members in four cities (several cells each), with swipes, passes and blocks, and one freed slot.
    static func population() -> (CommunityState, [UserKey]) {
        var random = SplitMix(state: 11)
        var state = CommunityState()
        var users: [UserKey] = []
        for n in 1...400 {
            let (lat, lon) = cities[n % cities.count]
            let member = CandidateIndexTests.member(
                UInt64(n), lat: lat + Double.random(in: -0.2...0.2, using: &random),
                lon: lon + Double.random(in: -0.2...0.2, using: &random), gender: UInt8(1 + n % 2),
                wants: Bool.random(using: &random) ? 0 : UInt8(1 << (2 - n % 2)), radius: 40)
            state.upsert(member, facts: MemberFacts())
            users.append(member.user)
        }
        for _ in 0..<3000 {
            let (v, t) = (users.randomElement(using: &random)!, users.randomElement(using: &random)!)
            guard v != t else { continue }
            state.index.recordSwipe(viewer: v, target: t, liked: Bool.random(using: &random))
        }
        for _ in 0..<100 {
            let (a, b) = (users.randomElement(using: &random)!, users.randomElement(using: &random)!)
            if a != b { state.index.block(a, b) }
        }
        _ = state.remove(users.removeLast())
        // Distinct model states, so a state left at its old slot shows.
        for (n, user) in users.enumerated() {
            var model = MemberState()
            (model.swipesGiven, model.likesGiven, model.swipesReceived) = (Float(n + 1), Float(n / 2), Float(n % 7))
            model.surplusReceived = Float(n % 5) - 2
            model.taste = SIMD4(repeating: Float(n % 11) - 5)
            state.recommender.setState(model, of: Int(state.index.slot(of: user)!))
        }
        return (state, users)
    }

    static func deck(_ index: CommunityIndex, _ viewer: UserKey, limit: Int = 1000) -> [IndexMatch] {
        index.candidates(for: viewer, DeckQuery(limit: limit, today: CandidateIndexTests.today, scanLimit: 100_000)) ?? []
    }

    @Test("Renumbering by place changes no deck (same members, distances and order), swipe, block or model")
    func arrangingKeepsEverything() {
        let (before, users) = Self.population()
        var after = before
        after.arrangeByPlace()
        #expect(after.index.count == before.index.count)
        for viewer in users {
            // The whole deck and a truncated one (the walk stops at the same member).
            for limit in [1000, 7] {
                let (old, new) = (Self.deck(before.index, viewer, limit: limit), Self.deck(after.index, viewer, limit: limit))
                #expect(old.map(\.user) == new.map(\.user))
                #expect(old.map(\.distanceKm) == new.map(\.distanceKm))
            }
            let (v, w) = (Int(before.index.slot(of: viewer)!), Int(after.index.slot(of: viewer)!))
            #expect(before.recommender.state(of: v) == after.recommender.state(of: w))
            for target in users.prefix(60) {
                #expect(after.index.hasSwiped(viewer, target) == before.index.hasSwiped(viewer, target))
                #expect(after.index.isBlocked(viewer, target) == before.index.isBlocked(viewer, target))
                #expect(after.index.isStillUnseen(viewer: viewer, target: target) == before.index.isStillUnseen(viewer: viewer, target: target))
            }
        }
        // The ranking reads the moved per-slot data: the same scores in the same order.
        let viewer = users[0]
        let rank = { (state: CommunityState) in
            state.index.rank(Self.deck(state.index, viewer), viewer: viewer, recommender: state.recommender, nowMinutes: 1000)
        }
        #expect(rank(before).map(\.match.user) == rank(after).map(\.match.user))
        #expect(rank(before).map(\.score) == rank(after).map(\.score))
    }

    @Test("After renumbering, each cell's members hold consecutive slots and no slot is free")
    func cellsAreContiguous() {
        var (state, users) = Self.population()
        state.arrangeByPlace()
        #expect(state.index.slotCapacity == users.count)
        var slotsOfCell: [UInt32: [Int32]] = [:]
        for user in users {
            let slot = state.index.slot(of: user)!
            slotsOfCell[state.index.bucketKey(ofSlot: slot), default: []].append(slot)
        }
        #expect(slotsOfCell.count > 8)
        for slots in slotsOfCell.values { #expect(slots.max()! - slots.min()! + 1 == Int32(slots.count)) }
    }

    @Test("An arranged index keeps working: a new member, a removal, a swipe")
    func changesAfterArranging() {
        var (state, users) = Self.population()
        state.arrangeByPlace()
        let viewer = users[0]
        let newcomer = CandidateIndexTests.member(
            1000, lat: Self.cities[1].0, lon: Self.cities[1].1, gender: 2, wants: 0, radius: 40)
        let viewerCity = CandidateIndexTests.member(1001, lat: Self.cities[1].0, lon: Self.cities[1].1, gender: 1, wants: 0, radius: 40)
        state.upsert(newcomer, facts: MemberFacts())
        state.upsert(viewerCity, facts: MemberFacts())
        #expect(Self.deck(state.index, viewerCity.user).contains { $0.user == newcomer.user })
        state.index.recordSwipe(viewer: viewerCity.user, target: newcomer.user, liked: true)
        #expect(!Self.deck(state.index, viewerCity.user).contains { $0.user == newcomer.user })
        _ = state.remove(viewer)
        #expect(state.index.slot(of: viewer) == nil)
        #expect(!Self.deck(state.index, users[4]).contains { $0.user == viewer })
    }
}

/// The walk compares birth dates with bounds computed once per deck instead of dividing per member: the bounds
/// must accept exactly the ages the division gives.
@Suite("Age range as birth dates")
struct BirthDateRangeTests {
    @Test("A birth date is inside the bounds exactly when its age is in the range", arguments: [
        0...0, 0...5, 18...18, 18...35, 25...99, 40...60, 1...1, 0...255,
    ])
    func boundsMatchTheDivision(_ ages: ClosedRange<Int>) {
        for today: Int32 in [2026_11_24, 2024_02_29, 2000_01_01] {
            let (after, upTo) = CommunityIndex.birthDateRange(ages: ages, today: today)
            var birth: Int32 = 1700_01_01
            while birth <= 2060_12_31 {
                let age = CommunityIndex.age(birthDate: birth, today: today)
                #expect((birth > after && birth <= upTo) == ages.contains(age), "born \(birth), today \(today)")
                // Every month's first and last days, and the day before and after today's date in each year.
                let month = birth / 100 % 100
                birth = birth % 100 == 1 ? birth + 30 : (month == 12 ? (birth / 10000 + 1) * 10000 + 101 : birth + 70)
            }
            for near in [today - 1, today, today + 1, today - 10000, today - 9999, today + 9999, today + 10000] {
                let age = CommunityIndex.age(birthDate: near, today: today)
                #expect((near > after && near <= upTo) == ages.contains(age), "born \(near), today \(today)")
            }
        }
    }
}

@Suite("User key text")
struct UserKeyTextTests {
    @Test("A user key's text is Foundation's UUID text in lower case, and parses back to the key")
    func matchesFoundation() {
        var random = SplitMix(state: 5)
        for key in [UserKey(high: 0, low: 0), UserKey(high: .max, low: .max), UserKey(high: 0x0123_4567_89ab_cdef, low: 0xfedc_ba98_7654_3210)]
            + (0..<2000).map({ _ in UserKey(high: random.next(), low: random.next()) })
        {
            let text = key.uuidString
            var bytes = [UInt8](repeating: 0, count: 16)
            for i in 0..<8 {
                bytes[i] = UInt8(truncatingIfNeeded: key.high >> UInt64(56 - 8 * i))
                bytes[8 + i] = UInt8(truncatingIfNeeded: key.low >> UInt64(56 - 8 * i))
            }
            let uuid = UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                                   bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
            #expect(text == uuid.uuidString.lowercased())
            #expect(UserKey(uuidString: text) == key)
        }
    }
}
