import KindredServiceKit

/// Which members a swiper's deck could show (DESIGN §5: a swipe is accepted only on such a member): discovery
/// holds every fact the deck uses in memory and answers `CheckCandidates` with the deck's own predicate.
public protocol CandidateCheck: Sendable {
    /// The members of `targets` the `viewer`'s deck could show (same community, eligible, mutual preferences,
    /// within reach). Throws `MatchError` UNAVAILABLE when it cannot be known: a swipe is never accepted unchecked.
    func shown(_ targets: [String], to viewer: String) async throws -> Set<String>
}

/// `CandidateCheck` through discovery's `CheckCandidates` (the kit's ``DiscoveryCandidates``); any failure is
/// UNAVAILABLE with a retry hint (fail closed).
public struct DiscoveryCandidateCheck: CandidateCheck {
    let discovery: DiscoveryCandidates

    public init(_ discovery: DiscoveryCandidates) {
        self.discovery = discovery
    }

    static let unavailable = MatchError(
        .unavailable,
        "Swiping is unavailable right now; retry shortly",
        retryAfter: .seconds(1)
    )

    public func shown(_ targets: [String], to viewer: String) async throws -> Set<String> {
        guard let shown = await self.discovery.shown(targets, to: viewer, includingLikers: false) else {
            throw Self.unavailable
        }
        return shown
    }
}
