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

    static let now = NIODeadline.uptimeNanoseconds(10_000_000_000_000)

    /// `count` failures `every` apart, the last one `ago` before `now`.
    static func failures(_ count: Int, every: TimeAmount = .seconds(1), ago: TimeAmount = .zero) -> [NIODeadline] {
        (0..<count).map { now - ago - every * Int64(count - 1 - $0) }
    }

    @Test(
        "the decision from the pair's and the subject's failures",
        arguments: [
            // (pair failures, subject failures, expected wait in seconds); free 3, perHour 20.
            (failures(2), failures(2), nil),
            (failures(3), failures(3), 1),
            (failures(4), failures(4), 2),
            (failures(13), failures(13), 900),  // the pair's doubling is capped at 15 min
            (failures(4, ago: .seconds(2)), failures(4), nil),  // the pair's wait runs from its last failure
            (failures(5, every: .minutes(15), ago: .minutes(61)), failures(5), nil),  // older than an hour
            (failures(0), failures(19), nil),  // other addresses' failures do not hold this one ...
            (failures(0), failures(20, every: .minutes(3), ago: .minutes(1)), 120),  // ... until the ceiling,
            (failures(0), failures(20, every: .minutes(1), ago: .minutes(30)), 660),  // until the oldest leaves the hour
        ] as [([NIODeadline], [NIODeadline], Int64?)]
    )
    func decision(pair: [NIODeadline], subject: [NIODeadline], wait: Int64?) {
        let result = SignInBackoff.wait(
            pairFailures: pair,
            subjectFailures: subject,
            now: Self.now,
            free: 3,
            perHour: 20
        )
        #expect(result == wait.map { .seconds($0) })
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
        for _ in 0..<failures { fixture.backoff.recordFailure(subject: "acct:x", address: "a") }
        #expect(
            fixture.backoff.delay(subject: "acct:x", address: "a", free: 3, perHour: 1000) == wait.map { .seconds($0) }
        )
        #expect(fixture.backoff.delay(subject: "acct:other", address: "a", free: 3, perHour: 1000) == nil)
        if let wait {
            fixture.advance(.seconds(wait))
            #expect(fixture.backoff.delay(subject: "acct:x", address: "a", free: 3, perHour: 1000) == nil)
        }
    }

    @Test("a stranger's failures from one address do not hold the owner at another")
    func ownerFromAnotherAddress() {
        let fixture = Fixture()
        // One wrong password every 15 minutes for two hours: the attacker's address stays held ...
        for _ in 0..<8 {
            fixture.backoff.recordFailure(subject: "acct:x", address: "attacker")
            fixture.advance(.minutes(15))
        }
        for _ in 0..<6 { fixture.backoff.recordFailure(subject: "acct:x", address: "attacker") }
        #expect(fixture.backoff.delay(subject: "acct:x", address: "attacker", free: 5, perHour: 100) != nil)
        // ... the owner's is not.
        #expect(fixture.backoff.delay(subject: "acct:x", address: "owner", free: 5, perHour: 100) == nil)
    }

    @Test("perHour failures from many addresses block every address; a success forgets only its address")
    func ceilingAndSuccess() {
        let fixture = Fixture()
        for index in 0..<3 {
            fixture.backoff.recordFailure(subject: "k", address: "bot\(index)")
            fixture.advance(.minutes(10))
        }
        // Failures at 0, 10 and 20 min; now 30 min: every address blocked until 60 min.
        #expect(fixture.backoff.delay(subject: "k", address: "owner", free: 100, perHour: 3) == .seconds(30 * 60))
        fixture.advance(.minutes(30))
        #expect(fixture.backoff.delay(subject: "k", address: "owner", free: 100, perHour: 3) == nil)
        fixture.backoff.recordFailure(subject: "k", address: "a")
        fixture.backoff.recordFailure(subject: "k", address: "a")
        #expect(fixture.backoff.delay(subject: "k", address: "a", free: 1, perHour: 100) != nil)
        fixture.backoff.recordSuccess(subject: "k", address: "a")
        #expect(fixture.backoff.delay(subject: "k", address: "a", free: 1, perHour: 100) == nil)
        // The subject's count stays after a success; a password reset clears everything.
        fixture.backoff.recordFailure(subject: "k", address: "b")
        #expect(fixture.backoff.delay(subject: "k", address: "c", free: 100, perHour: 3) != nil)
        fixture.backoff.reset(subject: "k")
        #expect(fixture.backoff.delay(subject: "k", address: "b", free: 1, perHour: 3) == nil)
        #expect(fixture.backoff.delay(subject: "k", address: "c", free: 1, perHour: 3) == nil)
    }
}
