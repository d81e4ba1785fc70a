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

/// Request ids: every server call runs with one in this task-local (the caller's `x-request-id` when it sent a
/// usable one, otherwise a new one), and every client call made inside it sends it on as `x-request-id`, so one
/// id follows a request through the gateway and every service it reaches, in each server's logs.
public enum GRPCRequestID {
    @TaskLocal public static var current: String?

    public static let metadataKey = "x-request-id"

    /// The caller's id when it is 1...128 visible ASCII characters; anything else is replaced.
    static func accept(_ value: String?) -> String {
        if let value, (1...128).contains(value.utf8.count), value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) {
            return value
        }
        return self.generate()
    }

    /// 16 lower-case hex characters from the system generator (unique enough to correlate logs; not a secret).
    public static func generate() -> String {
        let value = UInt64.random(in: .min ... .max)
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
