import Foundation
import NIOConcurrencyHelpers

/// In-memory rate limits of one auth instance: sliding windows of event times per key ("ip:…", "acct:…",
/// "mail:…"), and exponential backoff after failed sign-ins. Keys hold no secrets. Memory is bounded by
/// pruning keys whose events have all left the longest window.
public final class RateLimiter: Sendable {
    private struct State {
        var events: [String: [Double]] = [:]
        var operations = 0
    }

    private let state = NIOLockedValueBox(State())
    private let now: @Sendable () -> Double
    private static let longestWindow: Double = 86_400

    public init(now: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        self.now = now
    }

    /// Records one event for `key` unless `limit` events already happened within `window`; then returns how
    /// long to wait instead (and records nothing).
    func acquire(_ key: String, limit: Int, window: Double) -> Duration? {
        self.acquire([(key, limit, window)])
    }

    /// All-or-nothing over several limits: records the event under every key only when each allows it.
    func acquire(_ limits: [(key: String, limit: Int, window: Double)]) -> Duration? {
        let now = self.now()
        return self.state.withLockedValue { state in
            Self.prune(&state, now: now)
            var wait: Double = 0
            for (key, limit, window) in limits {
                let recent = (state.events[key] ?? []).filter { $0 > now - window }
                if recent.count >= limit, let oldest = recent.suffix(limit).first {
                    wait = max(wait, oldest + window - now)
                }
            }
            if wait > 0 { return .milliseconds(Int64((wait * 1000).rounded(.up))) }
            for (key, _, _) in limits { state.events[key, default: []].append(now) }
            return nil
        }
    }

    /// Whether a sign-in for `key` may be attempted now: after `free` failures, each further failure doubles the
    /// wait (1 s, 2 s, 4 s … at most 15 min) counted from the last failure; `perHour` failures block until the
    /// oldest leaves the hour.
    func signInDelay(_ key: String, free: Int, perHour: Int) -> Duration? {
        let now = self.now()
        return self.state.withLockedValue { state in
            let failures = (state.events["fail:" + key] ?? []).filter { $0 > now - 3600 }
            var until: Double = 0
            if failures.count >= perHour, let oldest = failures.suffix(perHour).first { until = oldest + 3600 }
            if failures.count >= free, let last = failures.last {
                let exponent = min(failures.count - free, 20)
                until = max(until, last + min(pow(2, Double(exponent)), 900))
            }
            return until > now ? .milliseconds(Int64(((until - now) * 1000).rounded(.up))) : nil
        }
    }

    func recordSignInFailure(_ key: String) {
        let now = self.now()
        self.state.withLockedValue { $0.events["fail:" + key, default: []].append(now) }
    }

    func resetSignInFailures(_ key: String) {
        _ = self.state.withLockedValue { $0.events.removeValue(forKey: "fail:" + key) }
    }

    private static func prune(_ state: inout State, now: Double) {
        state.operations += 1
        guard state.operations % 1024 == 0 else { return }
        state.events = state.events.compactMapValues { times in
            let kept = times.filter { $0 > now - longestWindow }
            return kept.isEmpty ? nil : kept
        }
    }
}
