import Foundation
import Testing

@testable import KindredDiscovery

/// The deck walk reads each cell's members with a copy of their filter card (issue 12, deck speed): the copies
/// must follow every change of a member, and the day used for ages must be the UTC calendar day.
@Suite("Deck walk")
struct DeckWalkTests {
    static let today: Int32 = 2026_11_24

    static func deck(_ index: CommunityIndex, _ viewer: UInt64) -> Set<UInt64> {
        Set((index.candidates(for: UserKey(high: 0, low: viewer), DeckQuery(limit: 100, today: Self.today)) ?? []).map(\.user.low))
    }

    enum Change: String, CaseIterable { case gender, wants, age, ageRange, radius, moved }

    /// Viewer 1 (gender 1, wants 2, born 1996) and members 2…6 in the same cell; member 2 is removed (the last
    /// member of the cell takes its place), then member 6 changes one filter field: the deck follows.
    @Test("A member's changed filter fields reach the walk, after a swap-remove in their cell too", arguments: Change.allCases)
    func changedFieldsReachTheWalk(_ change: Change) {
        var index = CommunityIndex()
        index.upsert(CandidateIndexTests.member(1, gender: 1, wants: 0b100))
        for n in 2...6 { index.upsert(CandidateIndexTests.member(UInt64(n), gender: 2, wants: 0b010)) }
        #expect(Self.deck(index, 1) == [2, 3, 4, 5, 6])
        index.remove(UserKey(high: 0, low: 2))
        #expect(Self.deck(index, 1) == [3, 4, 5, 6])
        var six = CandidateIndexTests.member(6, gender: 2, wants: 0b010)
        switch change {
        case .gender: six.gender = 1
        case .wants: six.interestedIn = 0b100
        case .age: six.birthDate = 2010_01_01  // 16: below the viewer's 18
        case .ageRange: six.ageMax = 25
        case .radius: six.radiusKm = 0  // coarse distances are at least 1 km: nobody is within 0
        case .moved: six.latitude = 48.85; six.longitude = 2.35
        }
        index.upsert(six)
        #expect(Self.deck(index, 1) == [3, 4, 5])
        index.upsert(CandidateIndexTests.member(6, gender: 2, wants: 0b010))
        #expect(Self.deck(index, 1) == [3, 4, 5, 6])
    }

    static let days: [(String, Int32)] = [
        ("1970-01-01T00:00:00Z", 1970_01_01), ("1969-12-31T23:59:59Z", 1969_12_31), ("2000-02-29T12:00:00Z", 2000_02_29),
        ("2024-02-29T23:59:59Z", 2024_02_29), ("2024-03-01T00:00:00Z", 2024_03_01), ("2026-11-24T11:00:00Z", 2026_11_24),
        ("2026-12-31T23:59:59Z", 2026_12_31), ("1900-03-01T00:00:00Z", 1900_03_01), ("2100-02-28T23:00:00Z", 2100_02_28),
        ("1955-07-15T06:30:00Z", 1955_07_15),
    ]

    @Test("Today is the UTC calendar day, as Foundation's Gregorian calendar says", arguments: days)
    func todayIsTheUTCDay(_ text: String, _ expected: Int32) throws {
        let date = try #require(ISO8601DateFormatter().date(from: text))
        #expect(DiscoveryService.today(date) == expected)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day], from: date)
        #expect(Int32(parts.year! * 10000 + parts.month! * 100 + parts.day!) == expected)
    }

    @Test("Today agrees with the calendar on every third day from 1900 to 2200")
    func todayAgreesEveryDay() {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var mismatches = 0
        for day in stride(from: -25_567, through: 84_000, by: 3) {
            let date = Date(timeIntervalSince1970: Double(day) * 86_400 + 43_210)
            let parts = calendar.dateComponents([.year, .month, .day], from: date)
            if DiscoveryService.today(date) != Int32(parts.year! * 10000 + parts.month! * 100 + parts.day!) { mismatches += 1 }
        }
        #expect(mismatches == 0)
    }
}
