/// What the match service knows about one pair of users, seen from the actor's side: the value the swipe,
/// block and unmatch rules work on, without I/O (the store loads it, applies the transition and writes the
/// result back in the same transaction, under the pair's lock).
public struct PairState: Sendable, Hashable {
    /// The actor's live swipe on the other (nil: none, or an undone pass).
    public var mine: SwipeRecord?
    /// The other's live swipe on the actor (only whether it is a like matters).
    public var theirs: SwipeKind?
    /// The active match or connection.
    public var match: MatchRecord?
    /// Whether either side blocked the other (which one is never said).
    public var blocked: Bool

    public init(mine: SwipeRecord? = nil, theirs: SwipeKind? = nil, match: MatchRecord? = nil, blocked: Bool = false) {
        self.mine = mine
        self.theirs = theirs
        self.match = match
        self.blocked = blocked
    }

    /// The result of a swipe.
    public enum SwipeAction: Sendable, Hashable {
        /// The target is blocked either way: answer exactly as for an unknown user (NOT_FOUND).
        case invisible
        /// The same swipe again: answer with the first outcome (replayed = true); write nothing.
        case replay(SwipeRecord)
        /// A different action on an already swiped person: FAILED_PRECONDITION ALREADY_SWIPED; write nothing.
        case alreadySwiped
        /// Write the swipe. `created`: a new match/connection to insert (and announce with MatchCreated);
        /// `reciprocated`: an existing one-way connection now mutual (update its reciprocated time).
        case record(SwipeRecord, created: MatchRecord?, reciprocated: MatchRecord?)
    }

    /// Applies a swipe of `actor` on `other` and returns what to write. `swipeID` and `matchID` are fresh ids
    /// (used only when a swipe or match is created).
    public mutating func swipe(
        _ kind: SwipeKind,
        actor: String,
        other: String,
        mode: MatchMode,
        swipeID: String,
        matchID: String,
        nowUnixMs: Int64
    ) -> SwipeAction {
        self.swipe(kind, actor: actor, other: other, mode: mode, swipeID: { swipeID }, matchID: { matchID },
                   nowUnixMs: nowUnixMs)
    }

    /// The same, with ids made only when needed (a replay or refusal makes none).
    public mutating func swipe(
        _ kind: SwipeKind,
        actor: String,
        other: String,
        mode: MatchMode,
        swipeID: () -> String,
        matchID: () -> String,
        nowUnixMs: Int64
    ) -> SwipeAction {
        if self.blocked { return .invisible }
        if let mine = self.mine {
            return mine.kind == kind ? .replay(mine) : .alreadySwiped
        }
        var record = SwipeRecord(id: swipeID(), kind: kind, swipedUnixMs: nowUnixMs, outcome: .recorded, matchID: nil)
        guard kind == .like else {
            self.mine = record
            return .record(record, created: nil, reciprocated: nil)
        }
        switch (mode, self.match) {
        case (.mutual, nil) where self.theirs == .like:
            // The other liked first: this like completes the match (the caller holds the pair's lock, so the
            // other's like is committed and no second match can be made).
            let match = MatchRecord(id: matchID(), mode: .mutual, initiator: other, createdUnixMs: nowUnixMs)
            record.outcome = .matched
            record.matchID = match.id
            self.match = match
            self.mine = record
            return .record(record, created: match, reciprocated: nil)
        case (.oneWay, nil):
            // A follow: the connection exists at once; mutual right away when the other already liked.
            var match = MatchRecord(id: matchID(), mode: .oneWay, initiator: actor, createdUnixMs: nowUnixMs)
            if self.theirs == .like { match.reciprocatedUnixMs = nowUnixMs }
            record.outcome = .connected
            record.matchID = match.id
            self.match = match
            self.mine = record
            return .record(record, created: match, reciprocated: nil)
        case (.oneWay, var match?) where match.initiator == other && match.reciprocatedUnixMs == nil:
            // Following back: the connection becomes mutual.
            match.reciprocatedUnixMs = nowUnixMs
            record.outcome = .connected
            record.matchID = match.id
            self.match = match
            self.mine = record
            return .record(record, created: nil, reciprocated: match)
        default:
            // Mutual mode without a like back yet (or a match that already exists): just the like.
            self.mine = record
            return .record(record, created: nil, reciprocated: nil)
        }
    }

    /// Ends the active match (unmatch); returns it, or nil when there was none (idempotent).
    public mutating func unmatch() -> MatchRecord? {
        defer { self.match = nil }
        return self.match
    }

    /// A block by either side: the pair is hidden from now on and any active match ends; returns the ended match.
    public mutating func block() -> MatchRecord? {
        self.blocked = true
        return self.unmatch()
    }

    /// Undoing the actor's pass: the person becomes unseen again. Only passes can be undone.
    public mutating func undoPass() -> Bool {
        guard let mine = self.mine, mine.kind == .pass else { return false }
        self.mine = nil
        return true
    }
}
