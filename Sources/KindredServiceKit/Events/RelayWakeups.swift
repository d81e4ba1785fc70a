import Synchronization

/// Which of the relay's delivery loops a wake-up reaches. Each consumer has several loops (`loopsPerConsumer`);
/// waking them all on every commit's NOTIFY made every loop run a claim for what one loop could take (at a few
/// hundred commits a second, most claims found nothing and only scanned the pending cursors). A notification
/// therefore wakes one loop per consumer: an idle one if there is one (it claims at once), else the next in
/// turn (a busy loop claims again once its batch is done, so a commit never waits for the poll). The poll
/// still wakes every loop (retries after backoff).
final class RelayWakeups: Sendable {
    private struct State {
        var busy: [Bool]
        /// Per consumer, which of its loops (0..<loopsPerConsumer) the search for a loop to wake starts at.
        var next: [Int]
    }

    /// One stream per loop, loop `i` of consumer `c` at `c * loopsPerConsumer + i`.
    let streams: [AsyncStream<Void>]
    private let continuations: [AsyncStream<Void>.Continuation]
    private let loopsPerConsumer: Int
    private let state: Mutex<State>

    /// `loopsPerConsumer` loops for each of `consumers` consumers; loop `c * loopsPerConsumer + i` is loop `i` of
    /// consumer `c`.
    init(consumers: Int, loopsPerConsumer: Int) {
        let pairs = (0..<consumers * loopsPerConsumer).map { _ in
            AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        }
        self.streams = pairs.map(\.stream)
        self.continuations = pairs.map(\.continuation)
        self.loopsPerConsumer = loopsPerConsumer
        self.state = Mutex(State(busy: Array(repeating: false, count: pairs.count), next: Array(repeating: 0, count: consumers)))
    }

    /// Every loop (the poll, a new LISTEN connection).
    func wakeAll() {
        for continuation in self.continuations { continuation.yield() }
    }

    /// One loop per consumer (a notification); returns the loops woken.
    @discardableResult
    func wakeOnePerConsumer() -> [Int] {
        let count = self.loopsPerConsumer
        let chosen = self.state.withLock { state -> [Int] in
            state.next.indices.map { consumer in
                let first = consumer * count
                let start = state.next[consumer]
                // The first idle loop in turn from `start`; all busy, the one at `start`.
                let offset = (0..<count).first { !state.busy[first + (start + $0) % count] } ?? 0
                let loop = (start + offset) % count
                state.next[consumer] = (loop + 1) % count
                return first + loop
            }
        }
        for loop in chosen { self.continuations[loop].yield() }
        return chosen
    }

    /// A loop took a wake-up (busy) or is about to wait for the next (idle).
    func setBusy(_ loop: Int, _ busy: Bool) {
        self.state.withLock { $0.busy[loop] = busy }
    }

    /// Ends every stream (the relay stops).
    func finish() {
        for continuation in self.continuations { continuation.finish() }
    }
}
