import Foundation
import KindredServiceKit

/// A user id as the index keeps it: the 128 bits of the UUID.
public struct UserKey: Hashable, Sendable, Comparable {
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    public init?(uuidString: String) {
        guard let uuid = UUID(uuidString: uuidString) else { return nil }
        let b = uuid.uuid
        self.high = [b.0, b.1, b.2, b.3, b.4, b.5, b.6, b.7].reduce(0) { $0 << 8 | UInt64($1) }
        self.low = [b.8, b.9, b.10, b.11, b.12, b.13, b.14, b.15].reduce(0) { $0 << 8 | UInt64($1) }
    }

    public static func < (a: UserKey, b: UserKey) -> Bool { (a.high, a.low) < (b.high, b.low) }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.high)
        hasher.combine(self.low)
    }

    /// The hash the index's dictionaries use (a rebuild hashes every key several times: SipHash was a third of
    /// its time). A multiply-xorshift of both halves mixed with the process's seed: user ids are issued by
    /// auth (UUIDv7, 74 random bits), so callers cannot choose keys that collide.
    public func _rawHashValue(seed: Int) -> Int {
        var z = self.high &* 0x9e37_79b9_7f4a_7c15 ^ self.low ^ UInt64(bitPattern: Int64(seed))
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return Int(truncatingIfNeeded: z ^ (z >> 31))
    }
}

extension UserKey: CustomStringConvertible {
    /// The canonical lower-case UUID text. Written byte by byte into the string's storage: every deck page
    /// formats its candidates' ids, and building it from radix strings and slices was a fifth of a deck's CPU.
    public var uuidString: String {
        String(unsafeUninitializedCapacity: 36) { buffer in
            var out = 0
            for nibble in 0..<32 {
                if nibble == 8 || nibble == 12 || nibble == 16 || nibble == 20 {
                    buffer[out] = UInt8(ascii: "-")
                    out += 1
                }
                let word = nibble < 16 ? self.high : self.low
                let value = UInt8(truncatingIfNeeded: word >> UInt64(60 - 4 * (nibble & 15))) & 15
                buffer[out] = value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
                out += 1
            }
            return 36
        }
    }

    public var description: String { self.uuidString }
}
