import KindredHTTP2
import NIOCore
import Testing

@Suite struct HTTP2AbuseBudgetTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    /// Charges `count` events `spacing` apart; returns how many were allowed before the budget ran out.
    static func allowed(_ event: HTTP2PeerEvent, count: Int, spacing: TimeAmount, burst: Int = 1000, rate: Int = 33) -> Int {
        var budget = HTTP2AbuseBudget(configuration: .init(burst: burst, refillPerSecond: rate), now: start)
        for index in 0..<count {
            if !budget.charge(event, now: start + spacing * Int64(index)) { return index }
        }
        return count
    }

    @Test(arguments: [
        // A burst at once: the whole budget, then out.
        (HTTP2PeerEvent.emptyData, 5000, TimeAmount.zero, 1000),
        (.smallWindowUpdate, 5000, .zero, 1000),
        (.streamReset, 5000, .zero, 1000),
        // Oversized header blocks cost a tenth of the burst: ten pass.
        (.headerListTooLarge, 50, .zero, 10),
        // Below the refill rate (one every 50 ms = 20/s < 33/s): never out.
        (.streamRefused, 3000, .milliseconds(50), 3000),
        (.settings, 3000, .milliseconds(50), 3000),
        // Above it (one every 10 ms = 100/s): out after burst / (1 − 33/100) ≈ 1492.
        (.priority, 5000, .milliseconds(10), 1492),
    ])
    func budget(event: HTTP2PeerEvent, count: Int, spacing: TimeAmount, expected: Int) {
        let allowed = Self.allowed(event, count: count, spacing: spacing)
        #expect(abs(allowed - expected) <= 2, "allowed \(allowed)")
    }

    /// How many events at `now` the budget allows before it runs out.
    static func drain(_ budget: inout HTTP2AbuseBudget, at now: NIODeadline) -> Int {
        var count = 0
        while budget.charge(.emptyData, now: now) { count += 1 }
        return count
    }

    @Test func refillsUpToTheBurstOnly() {
        var budget = HTTP2AbuseBudget(configuration: .init(burst: 10, refillPerSecond: 5), now: Self.start)
        #expect(Self.drain(&budget, at: Self.start) == 10)
        // An hour later it is full again (10 tokens, not 18,000), after paying back the overdraft of one.
        var later = HTTP2AbuseBudget(configuration: .init(burst: 10, refillPerSecond: 5), now: Self.start)
        _ = Self.drain(&later, at: Self.start)
        #expect(Self.drain(&later, at: Self.start + .hours(1)) == 10)
        // 200 ms at 5 tokens/s earn one token.
        var refilled = HTTP2AbuseBudget(configuration: .init(burst: 10, refillPerSecond: 5), now: Self.start)
        for _ in 0..<10 { _ = refilled.charge(.emptyData, now: Self.start) }
        #expect(Self.drain(&refilled, at: Self.start + .milliseconds(200)) == 1)
    }
}
