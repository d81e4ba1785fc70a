/// Which calls of a connection may start their handler now. While the connection's queued output is at or over
/// its cap (`GRPCServerConfiguration.connectionOutboundHighWatermark`), no new handler starts: a handler builds
/// its response before it can wait on the cap, so 100 streams whose reader keeps its windows shut would otherwise
/// each hold a response in memory (issue 16: 1.66 GB for 4 connections × 100 streams of 4 MiB messages).
///
/// Calls that may not start wait in arrival order (at most MAX_CONCURRENT_STREAMS of them, like the streams);
/// once the output has drained to half the cap (`shouldWake`), the waiting ones ask again, oldest first, and
/// start while the output stays under the cap. A call that ends while it waits (deadline, reset) is `remove`d.
/// Ordinary traffic never waits: small responses never bring a connection near the cap.
///
/// The question is asked by the call's task just before its handler runs (not when its request arrives):
/// tasks run one after another on the connection's event loop, so a handler that has just queued a large
/// message is counted before the next one is let in. A value type, tested without I/O.
struct HandlerAdmission: Sendable, Hashable {
    /// The connection's output cap in bytes.
    let cap: Int
    /// Streams whose handler waits to start, oldest first.
    private(set) var waiting: [Int32] = []

    init(cap: Int) {
        self.cap = cap
    }

    /// Whether the handler of `streamID` may start with `queuedOutput` bytes queued on the connection. If not,
    /// the stream is queued (once) and must ask again when `shouldWake` says so. Calls that arrived earlier and
    /// still wait go first.
    mutating func mayStart(_ streamID: Int32, queuedOutput: Int) -> Bool {
        let first = self.waiting.first
        if queuedOutput < self.cap && (first == nil || first == streamID) {
            if first != nil { self.waiting.removeFirst() }
            return true
        }
        if !self.waiting.contains(streamID) { self.waiting.append(streamID) }
        return false
    }

    /// Forgets a waiting stream (its call ended before its handler started).
    mutating func remove(_ streamID: Int32) {
        self.waiting.removeAll { $0 == streamID }
    }

    /// Whether the waiting calls should ask again: some wait, and the output has drained to half the cap
    /// (the low-water mark the connection's writers use too).
    func shouldWake(queuedOutput: Int) -> Bool {
        !self.waiting.isEmpty && queuedOutput <= self.cap / 2
    }
}
