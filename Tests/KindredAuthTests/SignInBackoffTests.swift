import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import KindredAuth

@Suite("Sign-in backoff")
struct SignInBackoffTests {
    /// A backoff on a clock the test moves.
    final class Fixture: Sendable {
        let offset = NIOLockedValueBox(TimeAmount.zero)
        let backoff: SignInBackoff
        init() {
            let base = NIODeadline.uptimeNanoseconds(1_000_000_000)
            let offset = self.offset
            self.backoff = SignInBackoff(clock: { base + offset.withLockedValue { $0 } })
        }
        func advance(_ amount: TimeAmount) { self.offset.withLockedValue { $0 = $0 + amount } }
    }

    @Test(
        "after the free failures each one doubles the wait, counted from the last failure",
        arguments: [
            (failures: 2, wait: nil), (failures: 3, wait: 1), (failures: 4, wait: 2), (failures: 5, wait: 4),
            (failures: 12, wait: 512), (failures: 13, wait: 900), (failures: 30, wait: 900),
        ] as [(Int, Int64?)]
    )
    func doubling(failures: Int, wait: Int64?) {
        let fixture = Fixture()
        for _ in 0..<failures { fixture.backoff.recordFailure("acct:x") }
        #expect(fixture.backoff.delay("acct:x", free: 3, perHour: 1000) == wait.map { .seconds($0) })
        #expect(fixture.backoff.delay("acct:other", free: 3, perHour: 1000) == nil)
        if let wait {
            fixture.advance(.seconds(wait))
            #expect(fixture.backoff.delay("acct:x", free: 3, perHour: 1000) == nil)
        }
    }

    @Test("perHour failures block until the oldest leaves the hour; a reset forgets them")
    func hourlyCapAndReset() {
        let fixture = Fixture()
        for _ in 0..<3 {
            fixture.backoff.recordFailure("k")
            fixture.advance(.minutes(10))
        }
        // Failures at 0, 10 and 20 min; now 30 min: blocked until 60 min.
        #expect(fixture.backoff.delay("k", free: 100, perHour: 3) == .seconds(30 * 60))
        fixture.advance(.minutes(30))
        #expect(fixture.backoff.delay("k", free: 100, perHour: 3) == nil)
        fixture.backoff.recordFailure("k")
        fixture.backoff.recordFailure("k")
        #expect(fixture.backoff.delay("k", free: 1, perHour: 100) != nil)
        fixture.backoff.reset("k")
        #expect(fixture.backoff.delay("k", free: 1, perHour: 100) == nil)
    }
}
