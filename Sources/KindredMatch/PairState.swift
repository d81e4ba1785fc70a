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

/// One live swipe of the actor on the other user.
public struct SwipeRecord: Sendable, Hashable {
    public var id: String
    public var kind: SwipeKind
    public var swipedUnixMs: Int64
    public var outcome: SwipeResultKind
    /// The match the swipe created or reciprocated (MATCHED / CONNECTED).
    public var matchID: String?
}

/// An active match or connection of the pair.
public struct MatchRecord: Sendable, Hashable {
    public var id: String
    public var mode: MatchMode
    /// Who liked first (one-way: the follower).
    public var initiator: String
    public var createdUnixMs: Int64
    /// One-way: when the other followed back; nil if not (always nil in mutual mode).
    public var reciprocatedUnixMs: Int64?
}

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

/// The rules of Undo (the caller's last pass, within the community's window and daily limit), without I/O.
public struct UndoPolicy: Sendable, Hashable {
    /// How long after a pass it may be undone, seconds; 0 disables undo.
    public var windowSeconds: Int64
    /// Undos per rolling 24 hours.
    public var dailyLimit: Int

    public init(windowSeconds: Int64, dailyLimit: Int) {
        self.windowSeconds = windowSeconds
        self.dailyLimit = dailyLimit
    }

    public enum Decision: Sendable, Hashable {
        /// Delete the pass and record the undo.
        case undo
        /// The named swipe was undone before: answer as then.
        case replay
        /// No swipe to undo (none at all, or the named id is not the caller's).
        case notFound
        /// UNDO_NOT_ALLOWED: the last swipe is a like, the window passed, undo is disabled, or the named pass is
        /// not the last swipe.
        case notAllowed
        /// Daily undo limit reached; `resetUnixMs` is when the oldest undo of the window leaves it.
        case limitReached(resetUnixMs: Int64)
    }

    /// - Parameters:
    ///   - latest: the caller's most recent live swipe.
    ///   - named: the swipe id the caller named, if any.
    ///   - namedWasUndone: whether `named` is among the caller's undone passes.
    ///   - undosInWindow: the caller's undo times (UTC ms) in the last 24 hours, oldest first.
    public func decide(
        latest: SwipeRecord?,
        named: String?,
        namedWasUndone: Bool,
        undosInWindow: [Int64],
        nowUnixMs: Int64
    ) -> Decision {
        if named != nil, namedWasUndone { return .replay }
        guard let latest else { return .notFound }
        if let named, named != latest.id { return namedWasUndone ? .replay : .notAllowed }
        guard latest.kind == .pass, self.windowSeconds > 0,
            nowUnixMs - latest.swipedUnixMs <= self.windowSeconds * 1000
        else { return .notAllowed }
        if undosInWindow.count >= self.dailyLimit {
            return .limitReached(resetUnixMs: (undosInWindow.first ?? nowUnixMs) + 86_400_000)
        }
        return .undo
    }
}

/// The daily like limit over a rolling 24 hours, without I/O.
public struct LikeBudget: Sendable, Hashable {
    public var limit: Int
    /// Likes given in the window so far.
    public var used: Int
    /// When the oldest like of the window was given (UTC ms); nil if none.
    public var oldestUnixMs: Int64?

    public init(limit: Int, used: Int, oldestUnixMs: Int64?) {
        self.limit = limit
        self.used = used
        self.oldestUnixMs = oldestUnixMs
    }

    /// Likes left, >= 0.
    public var remaining: Int { max(0, self.limit - self.used) }

    /// Takes one like at `now`; nil when granted, else when the budget resets (the oldest like leaves the window).
    public mutating func take(nowUnixMs: Int64) -> Int64? {
        guard self.used < self.limit else { return (self.oldestUnixMs ?? nowUnixMs) + 86_400_000 }
        self.used += 1
        if self.oldestUnixMs == nil { self.oldestUnixMs = nowUnixMs }
        return nil
    }
}
