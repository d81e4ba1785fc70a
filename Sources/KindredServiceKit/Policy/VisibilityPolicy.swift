/// What a viewer may see of another member.
public enum MemberView: String, Sendable, Hashable, CaseIterable {
    /// The profile card (GetProfile, GetProfiles and every list's cards), with its photos.
    case card
    /// The distance on the card (also subject to the member's own "hide distance").
    case distance
    /// The pair's chat thread: ListThreads, History, MarkRead/MarkDelivered, Subscribe's events of it.
    case thread
    /// An entry in the viewer's likes received (the member liked the viewer; one-way: follows the viewer).
    case likesReceived
    /// An entry in the viewer's matches and connections.
    case matches
    /// A place in the viewer's deck.
    case deck
    /// A result of the viewer's search.
    case search
}

/// What a viewer may do to another member.
public enum MemberAction: String, Sendable, Hashable, CaseIterable {
    /// Like or pass (whether it makes a match, or repeats an earlier swipe, is the swipe rules' business).
    case swipe
    /// Send a message on the pair's thread.
    case message
    case report
    case block
}

/// The one rule for "what may this viewer see of, and do to, that member", from their ``MemberRelation``.
/// Every RPC that shows or touches another member asks it; a refusal answers exactly as for an unknown member
/// (NOT_FOUND with the service's "no such user" or "no such thread" message, or absence from a list), so no
/// refusal tells the viewer why. The table (services/README.md states it as the rules):
///
/// | relation | card, distance | thread, message | likes received | matches | deck | search | swipe | report, block |
/// |---|---|---|---|---|---|---|---|---|
/// | none, reported | yes | no | yes | no | yes | yes | yes | yes |
/// | liked, passed | yes | no | no | no | no | yes | yes | yes |
/// | passed-on | yes | no | no | no | **no** | yes | yes | yes |
/// | matched, connected | yes | yes | connected only | yes | no | yes | yes | yes |
/// | unmatched, blocked, blocked-by | no | no | no | no | no | no | no | yes |
/// | deactivated, ineligible, outside preferences | no | no | no | no | no | no | no | yes |
/// | deleted, other community | no | no | no | no | no | no | no | no |
///
/// Passed-on differs from none only in the deck (a pass is never visible to the one passed on); blocked-by
/// answers exactly as unmatched, and so does blocked (the blocker's only extra is Unblock).
public enum VisibilityPolicy {
    /// Whether `relation` lets the viewer see `view` of the member.
    public static func allows(_ view: MemberView, _ relation: MemberRelation) -> Bool {
        switch view {
        case .card, .distance:
            return Self.shown.contains(relation)
        case .thread:
            return relation == .matched || relation == .connected
        case .likesReceived:
            // Someone who liked the viewer is, from the viewer's side, a member the viewer has not swiped yet;
            // in one-way communities their like is already a (not reciprocated) connection.
            return relation == .none || relation == .reported || relation == .connected
        case .matches:
            return relation == .matched || relation == .connected
        case .deck:
            return relation == .none || relation == .reported
        case .search:
            return Self.shown.contains(relation)
        }
    }

    /// Whether `relation` lets the viewer do `action` to the member.
    public static func allows(_ action: MemberAction, _ relation: MemberRelation) -> Bool {
        switch action {
        case .swipe:
            return Self.shown.contains(relation)
        case .message:
            return relation == .matched || relation == .connected
        case .report, .block:
            // Any member of the viewer's community, whatever lies between them: reporting after an unmatch is
            // normal, and a refusal here would tell a block (or a deactivation) from an unmatch.
            return relation != .deleted && relation != .otherCommunity
        }
    }

    /// The relations under which the member is shown at all: their card answers, and they may be swiped.
    public static let shown: Set<MemberRelation> = [.none, .liked, .passed, .passedOn, .reported, .matched, .connected]
}
