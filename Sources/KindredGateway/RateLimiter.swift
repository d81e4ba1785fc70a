import NIOConcurrencyHelpers
import NIOCore

/// A token bucket: `burst` tokens, refilled at `rate` per second; a call takes one.
public struct TokenBucket: Sendable {
    public let rate: Double
    public let burst: Double
    private(set) var tokens: Double
    private(set) var updated: NIODeadline

    public init(rate: Double, burst: Int, now: NIODeadline) {
        self.rate = rate
        self.burst = Double(burst)
        self.tokens = Double(burst)
        self.updated = now
    }

    /// Takes a token, or returns how long until one is available.
    public mutating func take(now: NIODeadline) -> Duration? {
        let elapsed = Double((now - self.updated).nanoseconds) / 1e9
        if elapsed > 0 {
            self.tokens = min(self.burst, self.tokens + elapsed * self.rate)
            self.updated = now
        }
        if self.tokens >= 1 {
            self.tokens -= 1
            return nil
        }
        let wait = (1 - self.tokens) / self.rate
        return .nanoseconds(Int64((wait * 1e9).rounded(.up)))
    }

    /// Whether the bucket is full again at `now` (then forgetting it changes nothing).
    func isFull(now: NIODeadline) -> Bool {
        self.tokens + Double((now - self.updated).nanoseconds) / 1e9 * self.rate >= self.burst
    }
}

/// Token buckets by key (client address, account id), kept in memory. The table is bounded: when it reaches
/// `maxKeys`, full buckets (which limit nothing) are dropped first; if it is still full, the least recently
/// refilled half goes, so a flood of new keys costs memory up to the bound and no more.
public final class RateLimiter: Sendable {
    public let rate: Double
    public let burst: Int
    public let maxKeys: Int
    private let buckets = NIOLockedValueBox([String: TokenBucket]())

    public init(rate: Double, burst: Int, maxKeys: Int = 100_000) {
        self.rate = rate
        self.burst = burst
        self.maxKeys = maxKeys
    }

    /// Takes a token for `key`; nil when allowed, else the time until the next token.
    public func acquire(_ key: String, now: NIODeadline = .now()) -> Duration? {
        self.buckets.withLockedValue { buckets in
            if buckets[key] == nil && buckets.count >= self.maxKeys { Self.evict(&buckets, now: now) }
            return buckets[key, default: TokenBucket(rate: self.rate, burst: self.burst, now: now)].take(now: now)
        }
    }

    public var trackedKeys: Int { self.buckets.withLockedValue { $0.count } }

    private static func evict(_ buckets: inout [String: TokenBucket], now: NIODeadline) {
        let limit = buckets.count
        buckets = buckets.filter { !$0.value.isFull(now: now) }
        guard buckets.count >= limit * 3 / 4 else { return }
        let oldest = buckets.sorted { $0.value.updated < $1.value.updated }.prefix(buckets.count / 2)
        for (key, _) in oldest { buckets[key] = nil }
    }
}
