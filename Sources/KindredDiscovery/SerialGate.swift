import Foundation
import NIOConcurrencyHelpers

/// Runs writers one at a time across suspension points (an async mutex): every change to the projection
/// commits to PostgreSQL and then reaches memory before the next one starts, so memory follows PostgreSQL's
/// commit order and a member re-indexed from PostgreSQL never misses a concurrent swipe.
final class SerialGate: Sendable {
    private struct State {
        var busy = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = NIOLockedValueBox(State())

    func run<T>(_ body: () async throws -> T) async rethrows -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let proceed = self.state.withLockedValue { state in
                if state.busy {
                    state.waiters.append(continuation)
                    return false
                }
                state.busy = true
                return true
            }
            if proceed { continuation.resume() }
        }
        defer {
            let next = self.state.withLockedValue { state in
                if state.waiters.isEmpty {
                    state.busy = false
                    return nil as CheckedContinuation<Void, Never>?
                }
                return state.waiters.removeFirst()
            }
            next?.resume()
        }
        return try await body()
    }
}
