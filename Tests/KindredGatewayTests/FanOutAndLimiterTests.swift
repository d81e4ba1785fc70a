import KindredGRPC
import NIOCore
import Testing

@testable import KindredGateway

@Suite("Fan-out and rate limiter")
struct FanOutAndLimiterTests {
    struct Answer: Sendable { var values: [String] = [] }
    typealias Part = FanOut<Answer>.Part

    static func part(_ name: String, essential: Bool = false, after delay: Duration = .zero, fails: Bool = false) -> Part {
        Part(name: name, essential: essential) {
            try await Task.sleep(for: delay)
            if fails { throw RPCError(.internalError, "\(name) failed") }
            return { $0.values.append(name) }
        }
    }

    @Test("complete answer when every part arrives")
    func complete() async throws {
        let (answer, missing) = try await FanOut<Answer>(partTimeout: .seconds(2))
            .gather(.init(), [Self.part("a", essential: true), Self.part("b"), Self.part("c")])
        #expect(Set(answer.values) == ["a", "b", "c"])
        #expect(missing.isEmpty)
    }

    @Test("a slow or failing non-essential part is left out and named; the answer does not wait for it")
    func partial() async throws {
        let started = ContinuousClock.now
        let (answer, missing) = try await FanOut<Answer>(partTimeout: .milliseconds(200)).gather(
            .init(),
            [
                Self.part("a", essential: true), Self.part("slow", after: .seconds(300)), Self.part("broken", fails: true),
                Part(name: "absent", essential: false, fetch: nil),
            ]
        )
        #expect(answer.values == ["a"])
        #expect(missing == ["slow", "broken", "absent"])
        // Far less than the slow part's 300 s (a generous bound: parallel tests can starve the 2-core pool).
        #expect(ContinuousClock.now - started < .seconds(60))
    }

    @Test("an essential failure fails the whole call with its error")
    func essentialFailure() async throws {
        await #expect(throws: RPCError.self) {
            _ = try await FanOut<Answer>(partTimeout: .seconds(1))
                .gather(.init(), [Self.part("a", essential: true, fails: true), Self.part("b")])
        }
    }

    @Test("token bucket: burst, then one token per 1/rate seconds, with the wait reported")
    func bucket() {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var bucket = TokenBucket(rate: 2, burst: 3, now: start)
        for _ in 0..<3 { #expect(bucket.take(now: start) == nil) }
        let wait = bucket.take(now: start)
        #expect(wait != nil && wait! > .milliseconds(400) && wait! <= .milliseconds(500))
        #expect(bucket.take(now: start + .milliseconds(500)) == nil)
        #expect(bucket.take(now: start + .milliseconds(500)) != nil)
    }

    @Test("limiter keys are independent and the table stays bounded under a flood of new keys")
    func limiterBounded() {
        let limiter = RateLimiter(rate: 1, burst: 1, maxKeys: 100)
        let now = NIODeadline.now()
        #expect(limiter.acquire("a", now: now) == nil)
        #expect(limiter.acquire("a", now: now) != nil)
        #expect(limiter.acquire("b", now: now) == nil)
        for index in 0..<10_000 { _ = limiter.acquire("flood-\(index)", now: now) }
        #expect(limiter.trackedKeys <= 100)
    }
}
