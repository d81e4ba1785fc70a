import Synchronization

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

    /// 16 lower-case hex characters, unique within the process and unlikely to repeat across processes (ids
    /// correlate log lines; they are not secrets). A counter scrambled by SplitMix64 from a random start: no
    /// system call per call, unlike `UInt64.random`, which asks the kernel each time, and no lock.
    public static func generate() -> String {
        var value = self.counter.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        value ^= value >> 31
        // Written straight into the string's storage: one allocation, no lock (this runs for every call).
        return String(unsafeUninitializedCapacity: 16) { buffer in
            let digits: StaticString = "0123456789abcdef"
            for index in 0..<16 {
                let nibble = Int(truncatingIfNeeded: value >> UInt64(60 - 4 * index)) & 0xF
                buffer[index] = digits.utf8Start[nibble]
            }
            return 16
        }
    }

    private static let counter = Atomic<UInt64>(UInt64.random(in: .min ... .max))
}
