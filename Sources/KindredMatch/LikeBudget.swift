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
