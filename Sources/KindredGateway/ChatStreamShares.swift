/// Who may open one more chat Subscribe stream on this gateway. Each account holds at most `perUser` streams
/// (its devices), and once the gateway's streams reach `pressure` (all but the last tenth of `capacity`), an
/// account that already holds one is refused another: the last tenth goes one stream per account to accounts
/// that have none. A few hundred accounts can then no longer take every stream: filling the gateway takes
/// `accountsToFill` accounts (896 with the defaults, 32 connections × 100 and 5 per account), where 320 did
/// when only chat's cap of 10 per account applied.
///
/// An account refused under pressure keeps the streams it has, and every stream of an account carries the same
/// events, so it misses nothing; ending its oldest stream instead would drop a device that did nothing wrong and
/// make the two clients take turns reconnecting. A value type without I/O (tested in ChatStreamSharesTests).
struct ChatStreamShares: Sendable, Equatable {
    enum Decision: Sendable, Equatable {
        case admit
        /// The account already holds `perUser` streams.
        case overUserCap
        /// The gateway is nearly full and the account already holds a stream.
        case overFairShare
        /// Every stream is taken.
        case full
    }

    let capacity: Int
    let perUser: Int
    /// Streams in all from which an account with a stream gets no other.
    let pressure: Int
    private(set) var streams: [String: Int] = [:]
    private(set) var total = 0

    init(capacity: Int, perUser: Int) {
        self.capacity = max(1, capacity)
        self.perUser = max(1, perUser)
        self.pressure = self.capacity - max(1, self.capacity / 10)
    }

    /// Fewest accounts that together take every stream: `perUser` each up to `pressure`, then one each.
    var accountsToFill: Int {
        (self.pressure + self.perUser - 1) / self.perUser + (self.capacity - self.pressure)
    }

    /// Takes a stream for `user` when it may have one.
    mutating func admit(_ user: String) -> Decision {
        let held = self.streams[user, default: 0]
        guard self.total < self.capacity else { return .full }
        guard held < self.perUser else { return .overUserCap }
        guard self.total < self.pressure || held == 0 else { return .overFairShare }
        self.streams[user] = held + 1
        self.total += 1
        return .admit
    }

    /// Gives back a stream taken with `admit`.
    mutating func release(_ user: String) {
        guard let held = self.streams[user] else { return }
        self.streams[user] = held > 1 ? held - 1 : nil
        self.total -= 1
    }
}
