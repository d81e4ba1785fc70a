import Foundation

/// Runs blocking work (waiting for a subprocess, reading its pipe) on a thread of its own. Blocking inside an async
/// test holds one of the two cooperative threads that every test's tasks and the in-process servers' handlers
/// share: under load that stalled other tests until their deadlines expired.
func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}
