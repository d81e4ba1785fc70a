import Foundation
import KindredServiceKit

/// The deck's one rule of who may be shown to whom, from the viewer's side: each of a gender the other wants,
/// each within the other's age range, and each within the other's radius, measured between published positions
/// (whole km, floor 1). The deck's walk (`CommunityIndex.candidates`) and `CheckCandidates` (a swipe is accepted
/// only on a member the deck could show: `CommunityIndex.couldShow`) both ask it, so the two cannot disagree.
/// Swipes, passes and blocks are not part of it: the walk excludes them afterwards, and a swipe never depends on
/// them (DESIGN §5: a pass is never visible to the one passed on).
///
/// Built once per deck from the viewer's card; each test is a few integer comparisons, inlined into the walk.
struct MutualFit {
    /// How far the viewer reaches, km (their own radius, or the deck's widened one).
    let radiusKm: Int
    private let viewerWants: UInt8
    private let viewerGenderBit: UInt8
    private let viewerAge: Int
    /// The viewer's age range as birth dates (`birthDateRange`): the walk divides nothing.
    private let bornAfter: Int32
    private let bornUpTo: Int32
    private let emptyAgeRange: Bool
    /// The viewer's published position.
    private let place: PublishedPoint

    init(viewer card: FilterCard, at place: PublishedPoint, radiusKm: Int, today: Int32) {
        self.radiusKm = radiusKm
        self.viewerWants = card.interestedIn
        self.viewerGenderBit = 1 << card.gender
        self.viewerAge = CommunityIndex.age(birthDate: card.birthDate, today: today)
        (self.bornAfter, self.bornUpTo) = CommunityIndex.birthDateRange(
            ages: Int(card.ageMin)...max(Int(card.ageMin), Int(card.ageMax)),
            today: today
        )
        self.emptyAgeRange = card.ageMin > card.ageMax
        self.place = place
    }

    /// Genders and ages, both ways (what the candidate's card alone decides; the walk tests it first).
    @inline(__always)
    func admits(_ card: FilterCard) -> Bool {
        (self.viewerWants == 0 || self.viewerWants & (1 << card.gender) != 0)
            && (card.interestedIn == 0 || card.interestedIn & self.viewerGenderBit != 0)
            && !self.emptyAgeRange && card.birthDate > self.bornAfter && card.birthDate <= self.bornUpTo
            && self.viewerAge >= Int(card.ageMin) && self.viewerAge <= Int(card.ageMax)
    }

    /// Whole km (floor 1) between the viewer's and a member's published positions: the distance every RPC shows
    /// (`PublishedLocation`, DESIGN §5).
    @inline(__always)
    func kilometres(to place: PublishedPoint) -> Int { PublishedLocation.kilometres(self.place, place) }

    /// Each within the other's radius at `km`.
    @inline(__always)
    func reaches(_ km: Int, _ card: FilterCard) -> Bool { km <= self.radiusKm && km <= Int(card.radiusKm) }
}
