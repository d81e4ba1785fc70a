import KindredServiceKit

/// Whose card a viewer may see as far as preferences go (DESIGN §5): a member the viewer's deck could show (same
/// community, eligible, mutual preferences, within reach at published positions), or one who liked the viewer.
/// Profile does not evaluate preferences: discovery holds every fact the deck uses in memory and answers
/// `CheckCandidates` (card mode, `include_likers`) with the deck's own predicate.
public protocol CardCheck: Sendable {
    /// The members of `targets` (1..50) `viewer` may see as far as preferences go. Throws ``ProfileError``
    /// UNAVAILABLE when it cannot be known: a card is never shown unchecked.
    func shown(_ targets: [String], to viewer: String) async throws -> Set<String>
}

/// ``CardCheck`` through discovery's `CheckCandidates` in card mode (`include_likers`, the kit's
/// ``DiscoveryCandidates``); any failure is UNAVAILABLE with a retry hint (fail closed).
public struct DiscoveryCardCheck: CardCheck {
    let discovery: DiscoveryCandidates

    public init(_ discovery: DiscoveryCandidates) {
        self.discovery = discovery
    }

    static let unavailable: ProfileError = {
        var error = ProfileError(.unavailable, "UNAVAILABLE", "Profiles are unavailable right now; retry shortly")
        error.retryAfter = .seconds(1)
        return error
    }()

    public func shown(_ targets: [String], to viewer: String) async throws -> Set<String> {
        guard let shown = await self.discovery.shown(targets, to: viewer, includingLikers: true) else {
            throw Self.unavailable
        }
        return shown
    }
}
