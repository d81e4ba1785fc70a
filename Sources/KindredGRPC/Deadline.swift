import NIOCore

/// Deadline propagation: a server handler runs with its call's deadline in this task-local, and every client
/// call made inside the handler (directly or in child tasks) is bounded by it, so a downstream call never
/// outlives the call that caused it.
public enum GRPCDeadline {
    @TaskLocal public static var current: NIODeadline?

    /// The earlier of an explicit timeout and the propagated deadline.
    public static func effective(timeout: Duration?) -> NIODeadline? {
        let explicit = timeout.map { NIODeadline.now() + TimeAmount($0) }
        switch (explicit, self.current) {
        case (nil, nil): return nil
        case (let value?, nil), (nil, let value?): return value
        case (let a?, let b?): return min(a, b)
        }
    }

    /// The time left until `deadline`, or nil without a deadline.
    public static func remaining(until deadline: NIODeadline?) -> Duration? {
        guard let deadline else { return nil }
        let nanoseconds = (deadline - NIODeadline.now()).nanoseconds
        return .nanoseconds(nanoseconds)
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let (nanoseconds, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        self = .nanoseconds(overflow ? (seconds < 0 ? .min : .max) : nanoseconds &+ attoseconds / 1_000_000_000)
    }
}
