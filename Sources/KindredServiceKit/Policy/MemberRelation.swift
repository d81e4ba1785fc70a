/// How a viewer stands to another member, from the viewer's side: the one input of ``VisibilityPolicy``.
///
/// Each service computes it from the data it holds (profile: its copies of blocks, matches and account states;
/// chat: the thread; discovery: its index; match: swipes, matches and blocks) through ``init(_:)``, so the same
/// facts give the same relation everywhere, and asks the policy instead of deciding inline.
public enum MemberRelation: String, Sendable, Hashable, CaseIterable {
    /// Nothing between them.
    case none
    /// The viewer liked the member (no match yet).
    case liked
    /// The viewer passed on the member.
    case passed
    /// The member passed on the viewer (the viewer has not swiped). Answers as `none` everywhere but the deck.
    case passedOn
    /// A report, by either side. Reports are invisible: answers as `none`.
    case reported
    /// An active match (mutual communities).
    case matched
    /// An active connection (one-way communities), reciprocated or not.
    case connected
    /// A match or connection that ended (either side unmatched, or a block ended it).
    case unmatched
    /// The viewer blocked the member.
    case blocked
    /// The member blocked the viewer. Must answer exactly as `unmatched`.
    case blockedBy
    /// The member's account is deactivated.
    case deactivated
    /// The member's account is deleted, or the id names nobody.
    case deleted
    /// The member is not shown to others: profile incomplete or paused (and not matched with the viewer).
    case ineligible
    /// The member belongs to another community.
    case otherCommunity
    /// The member is outside the viewer's or the member's preferences (and not matched with the viewer).
    case outsidePreferences

    /// The facts a service knows about a pair; what it does not know stays at the neutral default.
    public struct Facts: Sendable, Hashable {
        /// A swipe by one side on the other.
        public enum Swipe: Sendable, Hashable { case like, pass }
        /// The pair's match or connection.
        public enum Match: Sendable, Hashable { case none, matched, connected, ended }

        /// The member exists (a profile or membership the service holds; false: unknown or deleted).
        public var exists = true
        public var sameCommunity = true
        public var deactivated = false
        /// Complete and not paused.
        public var eligible = true
        /// Within both sides' preferences (gender, ages, radius): discovery's one predicate (`CheckCandidates`).
        /// Profile's cards take its card mode, where a member who liked the viewer counts as within (the likes
        /// received shows them).
        public var withinPreferences = true
        public var blockedByViewer = false
        public var blockedByMember = false
        /// An active match wins over an ended one of the same pair.
        public var match: Match = .none
        public var viewerSwipe: Swipe?
        public var memberSwipe: Swipe?
        public var reported = false

        public init(
            exists: Bool = true, sameCommunity: Bool = true, deactivated: Bool = false, eligible: Bool = true,
            withinPreferences: Bool = true, blockedByViewer: Bool = false, blockedByMember: Bool = false,
            match: Match = .none, viewerSwipe: Swipe? = nil, memberSwipe: Swipe? = nil, reported: Bool = false
        ) {
            self.exists = exists
            self.sameCommunity = sameCommunity
            self.deactivated = deactivated
            self.eligible = eligible
            self.withinPreferences = withinPreferences
            self.blockedByViewer = blockedByViewer
            self.blockedByMember = blockedByMember
            self.match = match
            self.viewerSwipe = viewerSwipe
            self.memberSwipe = memberSwipe
            self.reported = reported
        }
    }

    /// The relation the facts amount to. Precedence, first that applies: gone (deleted, other community,
    /// deactivated), separated (blocked, blocked-by, unmatched), together (matched, connected: a match keeps
    /// seeing a paused or ineligible member), not shown (ineligible, outside preferences), then the swipes
    /// (the viewer's own first, so a pass on the viewer shows only where the viewer has not swiped), reported,
    /// none.
    public init(_ facts: Facts) {
        if !facts.exists {
            self = .deleted
        } else if !facts.sameCommunity {
            self = .otherCommunity
        } else if facts.deactivated {
            self = .deactivated
        } else if facts.blockedByViewer {
            self = .blocked
        } else if facts.blockedByMember {
            self = .blockedBy
        } else {
            switch facts.match {
            case .ended: self = .unmatched
            case .matched: self = .matched
            case .connected: self = .connected
            case .none:
                if !facts.eligible {
                    self = .ineligible
                } else if !facts.withinPreferences {
                    self = .outsidePreferences
                } else if let mine = facts.viewerSwipe {
                    self = mine == .like ? .liked : .passed
                } else if facts.memberSwipe == .pass {
                    self = .passedOn
                } else if facts.reported {
                    self = .reported
                } else {
                    self = .none
                }
            }
        }
    }
}
