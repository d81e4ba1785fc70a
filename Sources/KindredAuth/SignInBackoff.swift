import NIOConcurrencyHelpers
import NIOCore

/// Failed sign-ins, in memory, counted twice: per (subject, client address) and per subject alone. The subject is
/// the account id, or "<community>:<login>" for an unknown login, so both behave alike.
///
/// - Per (subject, address): after `free` failures each further one doubles the wait (1 s, 2 s, 4 s … at most
///   15 min) counted from the last failure. A success from that address forgets them. This is what a guesser
///   meets, and it stays with the guesser's address: the owner signing in from their own address is not held.
/// - Per subject: `perHour` failures within an hour from all addresses together block every address until the
///   oldest leaves the hour. Set well above what one address can reach under its backoff (about 18 failures
///   in the first hour, then 4 an hour), it stops a campaign spread over many addresses without letting one
///   stranger lock a member out. Only time (or a password reset) clears it.
///
/// Keys whose failures are all older than an hour are pruned, so memory stays bounded by an hour of failures.
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

    /// How long until `subject` may try to sign in from `address`; nil when it may now.
    func delay(subject: String, address: String, free: Int, perHour: Int) -> Duration? {
        let now = self.clock()
        return self.state.withLockedValue { state in
            Self.wait(
                pairFailures: state.failures[Self.pairKey(subject, address)] ?? [],
                subjectFailures: state.failures[Self.subjectKey(subject)] ?? [],
                now: now,
                free: free,
                perHour: perHour
            )
        }
    }

    func recordFailure(subject: String, address: String) {
        let now = self.clock()
        self.state.withLockedValue { state in
            Self.prune(&state, now: now)
            state.failures[Self.pairKey(subject, address), default: []].append(now)
            state.failures[Self.subjectKey(subject), default: []].append(now)
        }
    }

    /// A correct password from `address`: that address's failures are forgotten; the subject's hourly count stays.
    func recordSuccess(subject: String, address: String) {
        _ = self.state.withLockedValue { $0.failures.removeValue(forKey: Self.pairKey(subject, address)) }
    }

    /// A password reset: the subject's failures from every address are forgotten.
    func reset(subject: String) {
        let pairPrefix = "pair:\(subject.utf8.count):\(subject):"
        self.state.withLockedValue { state in
            state.failures.removeValue(forKey: Self.subjectKey(subject))
            state.failures = state.failures.filter { !$0.key.hasPrefix(pairPrefix) }
        }
    }

    /// The decision, from the failure times of the pair and of the subject (oldest first), without I/O.
    static func wait(
        pairFailures: [NIODeadline],
        subjectFailures: [NIODeadline],
        now: NIODeadline,
        free: Int,
        perHour: Int
    ) -> Duration? {
        let pair = pairFailures.filter { $0 > now - Self.hour }
        let subject = subjectFailures.filter { $0 > now - Self.hour }
        var until = now
        if subject.count >= perHour, let oldest = subject.suffix(perHour).first {
            until = max(until, oldest + Self.hour)
        }
        if pair.count >= free, let last = pair.last {
            let exponent = min(pair.count - free, 20)
            until = max(until, last + .seconds(min(Int64(1) << Int64(exponent), 900)))
        }
        return until > now ? .nanoseconds((until - now).nanoseconds) : nil
    }

    /// The subject's length first, so no (subject, address) pair can spell another's key.
    private static func pairKey(_ subject: String, _ address: String) -> String {
        "pair:\(subject.utf8.count):\(subject):\(address)"
    }

    private static func subjectKey(_ subject: String) -> String { "subject:" + subject }

    private static func prune(_ state: inout State, now: NIODeadline) {
        state.operations += 1
        guard state.operations % 1024 == 0 else { return }
        state.failures = state.failures.compactMapValues { times in
            let kept = times.filter { $0 > now - hour }
            return kept.isEmpty ? nil : kept
        }
    }
}
