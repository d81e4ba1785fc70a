import Synchronization

/// Wakes notify's sender when events were applied here (something may be due now), so that a notification queued
/// due at once waits neither for the poll (`KINDRED_NOTIFY_SEND_POLL_MS`) nor for a push in flight to end. The poll
/// stays for what comes due later (a collapse window, a retry, quiet hours) and for other replicas' events.
/// A wake-up ends every wait in progress; with nobody waiting it is kept for the next wait.
final class SendWakeup: Sendable {
    private struct State {
        var pending = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    init() {}

    /// Whether the sender waits now (tests wait for it to be idle).
    var isWaiting: Bool { self.state.withLock { !$0.waiters.isEmpty } }

    func wake() {
        let waiters = self.state.withLock { state -> [CheckedContinuation<Void, Never>] in
            if state.waiters.isEmpty { state.pending = true }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns at the next wake-up (at once when one came since the last wait), after `timeout`, or when the task
    /// is cancelled.
    func wait(upTo timeout: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                if (try? await Task.sleep(for: timeout)) != nil { self.wake() }
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let now = self.state.withLock { state -> Bool in
                        if state.pending || Task.isCancelled {
                            state.pending = false
                            return true
                        }
                        state.waiters.append(continuation)
                        return false
                    }
                    if now { continuation.resume() }
                }
            } onCancel: {
                self.wake()
            }
            group.cancelAll()
        }
    }
}
