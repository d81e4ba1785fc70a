import KindredGRPCServices
import NIOConcurrencyHelpers
import NIOCore
import Testing

@Suite("Token-bucket limiter")
struct TokenBucketLimiterTests {
    @Test("token bucket: burst, then one token per 1/rate seconds, with the wait reported")
    func bucket() {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var bucket = TokenBucket(rate: 2, burst: 3, now: start)
        for _ in 0..<3 { #expect(bucket.take(now: start) == nil) }
        let wait = bucket.take(now: start)
        #expect(wait != nil && wait! > .milliseconds(400) && wait! <= .milliseconds(500))
        #expect(bucket.waitTime(now: start + .milliseconds(500)) == nil)
        #expect(bucket.take(now: start + .milliseconds(500)) == nil)
        #expect(bucket.take(now: start + .milliseconds(500)) != nil)
    }

    @Test("limiter keys are independent and the table stays bounded under a flood of new keys")
    func limiterBounded() {
        let limiter = TokenBucketLimiter(rate: 1, burst: 1, maxKeys: 100)
        let now = NIODeadline.now()
        #expect(limiter.acquire("a", now: now) == nil)
        #expect(limiter.acquire("a", now: now) != nil)
        #expect(limiter.acquire("b", now: now) == nil)
        for index in 0..<10_000 { _ = limiter.acquire("flood-\(index)", now: now) }
        #expect(limiter.trackedKeys <= 100)
    }

    @Test("\"5 per day, at most 1 per minute\" as two buckets: the longer wait wins, a refusal takes nothing")
    func twoBuckets() {
        let limiter = TokenBucketLimiter(.perWindow(60, seconds: 60))
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        let limits: [(key: String, limit: TokenBucketLimit)] = [
            ("min", .perWindow(1, seconds: 60)), ("day", .perWindow(5, seconds: 86_400)),
        ]
        #expect(limiter.acquire(limits, now: start) == nil)
        let minuteWait = limiter.acquire(limits, now: start + .seconds(1))
        #expect(minuteWait != nil && minuteWait! > .seconds(58) && minuteWait! <= .seconds(60))
        for minute in 1..<5 { #expect(limiter.acquire(limits, now: start + .minutes(Int64(minute))) == nil) }
        // The day bucket is empty now: it regains one token every 86 400 / 5 s = 4.8 h.
        let dayWait = limiter.acquire(limits, now: start + .minutes(5))
        #expect(dayWait != nil && dayWait! > .seconds(16_900) && dayWait! <= .seconds(17_280))
        #expect(limiter.acquire(limits, now: start + .seconds(17_281)) == nil)
        // A refused call takes no token from the buckets that had one.
        let other = TokenBucketLimiter(.perWindow(60, seconds: 60))
        #expect(
            other.acquire([("a", .perWindow(1, seconds: 60)), ("b", .perWindow(2, seconds: 60))], now: start) == nil
        )
        #expect(
            other.acquire([("a", .perWindow(1, seconds: 60)), ("b", .perWindow(2, seconds: 60))], now: start) != nil
        )
        #expect(other.acquire([("b", .perWindow(2, seconds: 60))], now: start) == nil)
        #expect(other.acquire([("b", .perWindow(2, seconds: 60))], now: start) != nil)
    }

    @Test("the injected clock decides when buckets refill")
    func injectedClock() {
        let offset = NIOLockedValueBox(TimeAmount.zero)
        let base = NIODeadline.uptimeNanoseconds(1_000_000_000)
        let limiter = TokenBucketLimiter(.perWindow(1, seconds: 60), clock: { base + offset.withLockedValue { $0 } })
        #expect(limiter.acquire("k") == nil)
        #expect(limiter.acquire("k") != nil)
        offset.withLockedValue { $0 = .seconds(60) }
        #expect(limiter.acquire("k") == nil)
    }
}
