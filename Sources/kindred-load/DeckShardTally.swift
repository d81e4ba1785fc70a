import Synchronization

/// With discovery as geographic shards: the decks each shard answered and how many calls were redirected
/// (`WRONG_SHARD`) before the owner answered, as the router saw them. Shared by every caller of a run.
final class DeckShardTally: Sendable {
    private struct Counts {
        var answered: [Int]
        var redirected = 0
    }

    private let counts: Mutex<Counts>

    init(shards: Int) {
        self.counts = Mutex(Counts(answered: Array(repeating: 0, count: shards)))
    }

    /// A deck `shard` answered; `redirected` when the call went to another shard first.
    func record(shard: Int, redirected: Bool) {
        self.counts.withLock { counts in
            counts.answered[shard] += 1
            if redirected { counts.redirected += 1 }
        }
    }

    /// The counts so far, then zero.
    func take() -> (answered: [Int], redirected: Int) {
        self.counts.withLock { counts in
            defer { counts = Counts(answered: Array(repeating: 0, count: counts.answered.count)) }
            return (counts.answered, counts.redirected)
        }
    }

    /// One line: decks per shard and the share redirected.
    static func line(_ counts: (answered: [Int], redirected: Int)) -> String {
        let total = counts.answered.reduce(0, +)
        let perShard = counts.answered.enumerated().map { "shard \($0.offset) \($0.element)" }.joined(separator: ", ")
        return "decks by shard: \(perShard); redirected first \(counts.redirected) "
            + "(\(total > 0 ? counts.redirected * 100 / total : 0) %)"
    }
}
