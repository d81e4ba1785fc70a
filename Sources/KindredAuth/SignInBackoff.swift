import NIOConcurrencyHelpers
import NIOCore

/// Failed sign-ins per key ("acct:<id>", or "login:<community>:<login>" for unknown logins), in memory: after
/// `free` failures each further one doubles the wait (1 s, 2 s, 4 s … at most 15 min) counted from the last
/// failure, and `perHour` failures within an hour block until the oldest leaves the hour. Not a token bucket:
/// the wait grows with the failures and a success (or a password reset) forgets them. Keys whose failures are
/// all older than an hour are pruned, so memory stays bounded by an hour of failures.
final class SignInBackoff: Sendable {
    private struct State {
        var failures: [String: [NIODeadline]] = [:]
        var operations = 0
    }

    private let state = NIOLockedValueBox(State())
    private let clock: @Sendable () -> NIODeadline
    private static let hour = TimeAmount.hours(1)

    init(clock: @escaping @Sendable () -> NIODeadline) {
        self.clock = clock
    }

    /// How long until a sign-in for `key` may be attempted; nil when it may be now.
    func delay(_ key: String, free: Int, perHour: Int) -> Duration? {
        let now = self.clock()
        return self.state.withLockedValue { state in
            let failures = (state.failures[key] ?? []).filter { $0 > now - Self.hour }
            var until = now
            if failures.count >= perHour, let oldest = failures.suffix(perHour).first {
                until = max(until, oldest + Self.hour)
            }
            if failures.count >= free, let last = failures.last {
                let exponent = min(failures.count - free, 20)
                until = max(until, last + .seconds(min(Int64(1) << Int64(exponent), 900)))
            }
            return until > now ? .nanoseconds((until - now).nanoseconds) : nil
        }
    }

    func recordFailure(_ key: String) {
        let now = self.clock()
        self.state.withLockedValue { state in
            Self.prune(&state, now: now)
            state.failures[key, default: []].append(now)
        }
    }

    func reset(_ key: String) {
        _ = self.state.withLockedValue { $0.failures.removeValue(forKey: key) }
    }

    private static func prune(_ state: inout State, now: NIODeadline) {
        state.operations += 1
        guard state.operations % 1024 == 0 else { return }
        state.failures = state.failures.compactMapValues { times in
            let kept = times.filter { $0 > now - hour }
            return kept.isEmpty ? nil : kept
        }
    }
}
