/// How a community turns likes into connections (kindred.common.v1.CommunityMode, stored as smallint).
public enum MatchMode: Int32, Sendable, Hashable {
    /// A match exists when both liked.
    case mutual = 1
    /// A like is a connection (follow) at once; a like back makes it mutual.
    case oneWay = 2
}

/// A swipe decision (kindred.common.v1.SwipeAction, stored as smallint).
public enum SwipeKind: Int32, Sendable, Hashable {
    case like = 1
    case pass = 2
}

/// What a swipe led to when it was recorded (kindred.match.v1.SwipeOutcome, stored with the swipe so a replay
/// answers as the first call did).
public enum SwipeResultKind: Int32, Sendable, Hashable {
    case recorded = 1
    case matched = 2
    case connected = 3
}
