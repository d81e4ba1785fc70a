import NIOConcurrencyHelpers
import NIOCore

/// How a token bucket fills: it holds at most `burst` tokens and gains `rate` per second; a call takes one.
public struct TokenBucketLimit: Sendable, Hashable {
    /// Tokens per second.
    public var rate: Double
    public var burst: Int

    public init(rate: Double, burst: Int) {
        precondition(rate > 0 && burst >= 1, "a token bucket needs a positive rate and a burst of at least 1")
        self.rate = rate
        self.burst = burst
    }

    /// "`count` per `seconds`": all `count` usable at once, then refilled evenly over `seconds` (so after a
    /// burst, one more every `seconds / count`).
    public static func perWindow(_ count: Int, seconds: Double) -> TokenBucketLimit {
        TokenBucketLimit(rate: Double(count) / seconds, burst: count)
    }
}

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

    public init(_ limit: TokenBucketLimit, now: NIODeadline) {
        self.init(rate: limit.rate, burst: limit.burst, now: now)
    }

    /// Takes a token, or returns how long until one is available (and takes nothing).
    public mutating func take(now: NIODeadline) -> Duration? {
        self.refill(now: now)
        if self.tokens >= 1 {
            self.tokens -= 1
            return nil
        }
        return self.wait
    }

    /// How long until a token is available at `now`; nil when one is. Changes nothing.
    public func waitTime(now: NIODeadline) -> Duration? {
        var copy = self
        copy.refill(now: now)
        return copy.tokens >= 1 ? nil : copy.wait
    }

    private var wait: Duration {
        .nanoseconds(Int64(((1 - self.tokens) / self.rate * 1e9).rounded(.up)))
    }

    private mutating func refill(now: NIODeadline) {
        let elapsed = Double((now - self.updated).nanoseconds) / 1e9
        if elapsed > 0 {
            self.tokens = min(self.burst, self.tokens + elapsed * self.rate)
            self.updated = now
        }
    }

    /// Whether the bucket is full again at `now` (then forgetting it changes nothing).
    func isFull(now: NIODeadline) -> Bool {
        self.tokens + Double((now - self.updated).nanoseconds) / 1e9 * self.rate >= self.burst
    }
}

/// Token buckets by key (client address, account id, email address), kept in memory: the one rate limiter of
/// Kindred servers. Each key's bucket has the limit it was first used with (`limit` unless the call names
/// one). The table is bounded: when it reaches `maxKeys`, full buckets (which limit nothing) are dropped first;
/// if it is still full, the least recently refilled half goes, so a flood of new keys costs memory up to the
/// bound and no more.
public final class TokenBucketLimiter: Sendable {
    /// The limit of `acquire(_:)`.
    public let limit: TokenBucketLimit
    public let maxKeys: Int
    private let clock: @Sendable () -> NIODeadline
    private let buckets = NIOLockedValueBox([String: TokenBucket]())

    /// `clock` is the monotonic time the buckets refill by; tests pass one they can move forward.
    public init(
        _ limit: TokenBucketLimit,
        maxKeys: Int = 100_000,
        clock: @escaping @Sendable () -> NIODeadline = { .now() }
    ) {
        self.limit = limit
        self.maxKeys = maxKeys
        self.clock = clock
    }

    public convenience init(rate: Double, burst: Int, maxKeys: Int = 100_000) {
        self.init(TokenBucketLimit(rate: rate, burst: burst), maxKeys: maxKeys)
    }

    /// Takes a token for `key`; nil when allowed, else the time until the next token.
    public func acquire(_ key: String, now: NIODeadline? = nil) -> Duration? {
        self.acquire([(key, self.limit)], now: now)
    }

    /// All or nothing over several buckets ("5 per day and 1 per minute"): takes a token from each only when
    /// every one has a token; else takes nothing and returns the longest wait.
    public func acquire(_ requests: [(key: String, limit: TokenBucketLimit)], now: NIODeadline? = nil) -> Duration? {
        let now = now ?? self.clock()
        return self.buckets.withLockedValue { buckets in
            for (key, _) in requests where buckets[key] == nil && buckets.count >= self.maxKeys {
                Self.evict(&buckets, now: now)
            }
            var wait: Duration?
            for (key, limit) in requests {
                if let keyWait = (buckets[key] ?? TokenBucket(limit, now: now)).waitTime(now: now) {
                    wait = max(wait ?? .zero, keyWait)
                }
            }
            if wait != nil { return wait }
            for (key, limit) in requests {
                _ = buckets[key, default: TokenBucket(limit, now: now)].take(now: now)
            }
            return nil
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
