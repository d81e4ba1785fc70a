/// What a swipe led to, for the handler to answer.
public struct SwipeReply: Sendable, Hashable {
    public var swipe: SwipeRecord
    /// The match/connection to show (MATCHED or CONNECTED outcome, while it is active).
    public var match: MatchRecord?
    public var replayed: Bool
    public var remainingLikes: Int
}
