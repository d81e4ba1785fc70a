import Foundation

/// When a failed webhook delivery is tried again: exponential backoff with jitter from `firstDelay`, multiplied by
/// `factor` per attempt up to `maxDelay`, an endpoint's Retry-After honoured (up to `maxDelay`), and no attempt
/// later than `giveUpAfter` from when the delivery was queued (or replayed): the last one falls at that mark, and
/// a failure after it ends the delivery as failed, kept for replay. With the defaults the attempts fall at about
/// 5 s, 20 s, 1 min, 3 min, 10 min, 30 min, 1.5 h, 3 h, then every 3 h until a day has passed.
struct WebhookRetrySchedule: Sendable, Equatable {
    var firstDelay: Duration = .seconds(5)
    var factor: Double = 3
    var maxDelay: Duration = .seconds(3 * 3600)
    var giveUpAfter: Duration = .seconds(86_400)
    /// Each delay is spread by ± this fraction, so deliveries that failed together do not return together.
    var jitter: Double = 0.2

    enum Decision: Equatable {
        case retry(after: Duration)
        case giveUp
    }

    /// What follows a failed attempt: `attempts` made so far (this one included), `elapsed` since the delivery was
    /// queued, the endpoint's Retry-After if it sent one, and `random` in 0..<1 for the jitter.
    func next(attempts: Int, elapsed: Duration, retryAfter: Duration? = nil, random: Double) -> Decision {
        guard elapsed < self.giveUpAfter else { return .giveUp }
        var delay = self.delay(attempts: attempts, random: random)
        if let retryAfter { delay = max(delay, min(retryAfter, self.maxDelay)) }
        return .retry(after: min(delay, self.giveUpAfter - elapsed))
    }

    /// The jittered backoff after `attempts` failed attempts (1 = the first failure).
    func delay(attempts: Int, random: Double) -> Duration {
        let exponent = Double(max(0, attempts - 1))
        let base = min(Self.seconds(self.firstDelay) * pow(self.factor, min(exponent, 64)), Self.seconds(self.maxDelay))
        let spread = 1 - self.jitter + 2 * self.jitter * min(max(random, 0), 1)
        return .milliseconds(Int64((base * spread * 1000).rounded()))
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
