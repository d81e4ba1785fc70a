/// Which of some members a viewer may be shown as far as preferences go (DESIGN §5). Match asks it before it
/// accepts a swipe (the members the swiper's deck could show); profile before it shows a card (those, and the
/// members who liked the viewer). Neither evaluates preferences itself: discovery holds every fact the deck uses
/// in memory and answers `CheckCandidates` with the deck's own predicate (``DiscoveryCandidateCheck``).
public protocol CandidateCheck: Sendable {
    /// The members of `targets` (1..50) `viewer` may be shown. Throws UNAVAILABLE when it cannot be known: a swipe
    /// is never accepted, and a card never shown, unchecked.
    func shown(_ targets: [String], to viewer: String) async throws -> Set<String>
}

/// ``CandidateCheck`` through discovery's `CheckCandidates` (``DiscoveryCandidates``): `includingLikers` adds the
/// members who liked the viewer (profile's card mode). Any failure throws `unavailable`, the service's own answer
/// with a retry hint (fail closed).
public struct DiscoveryCandidateCheck: CandidateCheck {
    let discovery: DiscoveryCandidates
    let includingLikers: Bool
    let unavailable: ServiceError

    public init(_ discovery: DiscoveryCandidates, includingLikers: Bool, unavailable: ServiceError) {
        self.discovery = discovery
        self.includingLikers = includingLikers
        self.unavailable = unavailable
    }

    public func shown(_ targets: [String], to viewer: String) async throws -> Set<String> {
        guard let shown = await self.discovery.shown(targets, to: viewer, includingLikers: self.includingLikers) else {
            throw self.unavailable
        }
        return shown
    }
}
