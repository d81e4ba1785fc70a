import Synchronization

/// Wakes notify's senders when events were applied here (something may be due now), so that a notification queued
/// due at once waits neither for the poll (`KINDRED_NOTIFY_SEND_POLL_MS`) nor for a push in flight to end. The poll
/// stays for what comes due later (a collapse window, a retry, quiet hours) and for other replicas' events.
///
/// Each sender takes its own stream (``subscribe()``) keeping the newest wake-up only (`bufferingNewest(1)`, as the
/// mail relay's and the events relay's loops wait): a wake-up while the sender is busy is kept for its next look,
/// and several while it is busy are one. The sender yields into the same stream itself (its poll, a push that
/// ended), so one loop waits for all of them.
final class SendWakeup: Sendable {
    private struct Subscribers {
        var nextID: UInt64 = 0
        var continuations: [UInt64: AsyncStream<Void>.Continuation] = [:]
    }

    private let subscribers = Mutex(Subscribers())

    init() {}

    /// A stream of this wake-up's wake-ups for one sender, and its continuation (for the sender's own); finishing
    /// the continuation ends the subscription.
    func subscribe() -> (stream: AsyncStream<Void>, continuation: AsyncStream<Void>.Continuation) {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = self.subscribers.withLock { subscribers in
            subscribers.nextID += 1
            subscribers.continuations[subscribers.nextID] = continuation
            return subscribers.nextID
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return (stream, continuation)
    }

    /// Senders subscribed now (tests).
    var subscriberCount: Int { self.subscribers.withLock { $0.continuations.count } }

    func wake() {
        for continuation in self.subscribers.withLock({ Array($0.continuations.values) }) { continuation.yield() }
    }
}
