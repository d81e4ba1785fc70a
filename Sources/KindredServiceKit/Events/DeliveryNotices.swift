import NIOConcurrencyHelpers

/// Wakes ``Outbox/awaitDelivery(partition:consumers:on:timeout:interval:)`` in the producing process as soon as that
/// process's ``OutboxRelay`` has recorded a consumer's answer for a partition, so a waiting call reads the cursors
/// again once per answer instead of polling PostgreSQL on a short timer.
///
/// One per producer per process (``of(producer:)``): a service's `Outbox` and its relay find the same one by the
/// producer's name. A notice only says "look again": the cursors in PostgreSQL stay the truth, so a notice about
/// another partition or an answer that did not reach the waited-for sequence costs one query and nothing else.
/// Answers recorded by another replica's relay send no notice here; the waiter's slower poll sees them.
public final class DeliveryNotices: Sendable {
    /// A waiter's registration: made before the waiter reads the cursors, so a notice that arrives between that
    /// read and ``wait(_:atMost:)`` is kept, not lost.
    public struct Watch: Sendable {
        fileprivate let partition: String
        fileprivate let id: UInt64
    }

    private struct Waiter {
        var notified = false
        var continuation: CheckedContinuation<Bool, Never>?
    }

    private struct State {
        var nextID: UInt64 = 0
        var waiters: [String: [UInt64: Waiter]] = [:]
    }

    private let state = NIOLockedValueBox(State())
    private static let registry = NIOLockedValueBox<[String: DeliveryNotices]>([:])

    private init() {}

    /// The notices of `producer` ("match", "profile", ...) in this process.
    public static func of(producer: String) -> DeliveryNotices {
        Self.registry.withLockedValue { registry in
            if let notices = registry[producer] { return notices }
            let notices = DeliveryNotices()
            registry[producer] = notices
            return notices
        }
    }

    /// Starts watching `partition`; end it with ``end(_:)``.
    public func watch(_ partition: String) -> Watch {
        self.state.withLockedValue { state in
            state.nextID &+= 1
            state.waiters[partition, default: [:]][state.nextID] = Waiter()
            return Watch(partition: partition, id: state.nextID)
        }
    }

    public func end(_ watch: Watch) {
        let continuation = self.state.withLockedValue { state -> CheckedContinuation<Bool, Never>? in
            let waiter = state.waiters[watch.partition]?.removeValue(forKey: watch.id)
            if state.waiters[watch.partition]?.isEmpty == true { state.waiters[watch.partition] = nil }
            return waiter?.continuation
        }
        continuation?.resume(returning: false)
    }

    /// A relay recorded answers for `partitions`: wakes everyone watching one of them.
    public func answered(partitions: some Sequence<String>) {
        let continuations = self.state.withLockedValue { state -> [CheckedContinuation<Bool, Never>] in
            var woken: [CheckedContinuation<Bool, Never>] = []
            for partition in partitions {
                guard let watchers = state.waiters[partition] else { continue }
                for (id, var waiter) in watchers {
                    if let continuation = waiter.continuation {
                        woken.append(continuation)
                        waiter.continuation = nil
                    } else {
                        waiter.notified = true
                    }
                    state.waiters[partition]![id] = waiter
                }
            }
            return woken
        }
        for continuation in continuations { continuation.resume(returning: true) }
    }

    /// Why ``wait(_:atMost:)`` returned.
    public enum WaitEnd: Sendable, Hashable {
        /// A notice for the watched partition came (or was pending).
        case notice
        case timeout
        /// The task was cancelled or the watch ended.
        case cancelled
    }

    /// Returns when a notice for the watched partition came since the last wait (at once if one is pending),
    /// after `timeout`, or when the task is cancelled; says which.
    @discardableResult
    public func wait(_ watch: Watch, atMost timeout: Duration) async -> WaitEnd {
        await withTaskGroup(of: WaitEnd.self) { group in
            group.addTask { await self.notice(watch) ? .notice : .cancelled }
            group.addTask {
                do {
                    try await Task.sleep(for: timeout)
                    return .timeout
                } catch {
                    return .cancelled
                }
            }
            let end = await group.next() ?? .cancelled
            group.cancelAll()
            return end
        }
    }

    /// true when a notice came, false when the task was cancelled or the watch ended.
    private func notice(_ watch: Watch) async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let now = self.state.withLockedValue { state -> Bool? in
                    guard var waiter = state.waiters[watch.partition]?[watch.id] else { return false }
                    // Cancelled before the continuation was stored: the handler found nothing to resume.
                    if waiter.notified || Task.isCancelled {
                        let notified = waiter.notified
                        waiter.notified = false
                        state.waiters[watch.partition]![watch.id] = waiter
                        return notified
                    }
                    waiter.continuation = continuation
                    state.waiters[watch.partition]![watch.id] = waiter
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let continuation = self.state.withLockedValue { state -> CheckedContinuation<Bool, Never>? in
                let continuation = state.waiters[watch.partition]?[watch.id]?.continuation
                if continuation != nil { state.waiters[watch.partition]![watch.id]!.continuation = nil }
                return continuation
            }
            continuation?.resume(returning: false)
        }
    }
}
