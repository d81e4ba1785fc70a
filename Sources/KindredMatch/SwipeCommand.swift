/// One caller's swipe as the writer receives it.
public struct SwipeCommand: Sendable, Hashable {
    public var swiper: String
    /// The swiper's community (the token's `cid`).
    public var community: String
    public var target: String
    public var kind: SwipeKind
    public var surface: String
    /// Whether the swiper's deck could show the target (`CandidateCheck`): if not, the target is outside preferences
    /// (`SwipeBatch.relation`) and the swipe is refused as for an unknown user, unless it replays the swiper's own
    /// earlier swipe or acts on an existing match.
    public var deckCouldShow: Bool

    public init(
        swiper: String, community: String, target: String, kind: SwipeKind, surface: String, deckCouldShow: Bool
    ) {
        self.swiper = swiper
        self.community = community
        self.target = target
        self.kind = kind
        self.surface = surface
        self.deckCouldShow = deckCouldShow
    }
}
