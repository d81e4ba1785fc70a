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
