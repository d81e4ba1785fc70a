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
        /// Per consumer, the position in its loops where the search for a loop to wake starts.
        var next: [Int]
    }

    /// One stream per loop, in the order of ``loops(of:)``.
    let streams: [AsyncStream<Void>]
    private let continuations: [AsyncStream<Void>.Continuation]
    /// Per consumer, the indices of its loops.
    private let groups: [[Int]]
    private let state: Mutex<State>

    /// `loopsPerConsumer` loops for each of `consumers` consumers; loop `c * loopsPerConsumer + i` is loop `i` of
    /// consumer `c`.
    init(consumers: Int, loopsPerConsumer: Int) {
        let pairs = (0..<consumers * loopsPerConsumer).map { _ in
            AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        }
        self.streams = pairs.map(\.stream)
        self.continuations = pairs.map(\.continuation)
        self.groups = (0..<consumers).map { consumer in
            Array(consumer * loopsPerConsumer..<(consumer + 1) * loopsPerConsumer)
        }
        self.state = Mutex(State(busy: Array(repeating: false, count: pairs.count), next: Array(repeating: 0, count: consumers)))
    }

    /// Every loop (the poll, a new LISTEN connection).
    func wakeAll() {
        for continuation in self.continuations { continuation.yield() }
    }

    /// One loop per consumer (a notification); returns the loops woken.
    @discardableResult
    func wakeOnePerConsumer() -> [Int] {
        let chosen = self.state.withLock { state -> [Int] in
            self.groups.enumerated().map { consumer, loops in
                let start = state.next[consumer]
                let order = (0..<loops.count).map { loops[(start + $0) % loops.count] }
                let loop = order.first { !state.busy[$0] } ?? order[0]
                state.next[consumer] = (loops.firstIndex(of: loop)! + 1) % loops.count
                return loop
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
