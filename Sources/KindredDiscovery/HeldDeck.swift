import Foundation
import NIOConcurrencyHelpers

/// A held deck's entry: who, their score and coarse km (24 bytes; the slot is looked up when the page is served,
/// so a deck survives a rebuild that renumbers slots).
struct HeldEntry: Sendable, Equatable {
    var user: UserKey
    var score: Float
    var distanceKm: UInt16

    init(_ ranked: RankedCandidate) {
        self.user = ranked.match.user
        self.score = ranked.score
        self.distanceKm = UInt16(clamping: ranked.match.distanceKm)
    }
}

/// One ranked deck held for its pages: who asked, in which community, and the rest of the ranking (the
/// entries not served yet, in order).
struct HeldDeck: Sendable {
    var viewer: UserKey
    var community: String
    var remaining: [HeldEntry]
    var radiusKm: Int
    var widened: Bool
    var expires: ContinuousClock.Instant

    /// What holding it costs: its entries and a fixed overhead (the struct, the community string's storage, the
    /// dictionary slot, the array header and the eviction queue's entry).
    var bytes: Int { self.remaining.count * MemoryLayout<HeldEntry>.stride + DeckPages.overheadPerDeck }
}
