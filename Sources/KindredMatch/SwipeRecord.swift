/// One live swipe of the actor on the other user.
public struct SwipeRecord: Sendable, Hashable {
    public var id: String
    public var kind: SwipeKind
    public var swipedUnixMs: Int64
    public var outcome: SwipeResultKind
    /// The match the swipe created or reciprocated (MATCHED / CONNECTED).
    public var matchID: String?
}
