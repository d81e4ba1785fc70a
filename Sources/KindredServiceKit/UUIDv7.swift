import Foundation
import KindredOpenSSL

/// UUIDv7 (RFC 9562): 48-bit Unix milliseconds, version and variant bits, random rest; canonical lower-case text.
/// Ids generated later sort later (to the millisecond), which keeps B-tree inserts at the right edge.
public enum UUIDv7 {
    /// A new id; throws only when the system's random source fails.
    public static func generate(now: Date = Date()) throws -> String {
        var bytes = try SecureRandom.bytes(count: 16)
        let milliseconds = UInt64(now.timeIntervalSince1970 * 1000)
        for index in 0..<6 { bytes[index] = UInt8(truncatingIfNeeded: milliseconds >> (40 - 8 * UInt64(index))) }
        bytes[6] = (bytes[6] & 0x0f) | 0x70
        bytes[8] = (bytes[8] & 0x3f) | 0x80
        // Hex by table: String(format:) per byte cost more than the rest of a swipe's bookkeeping.
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(36)
        for (index, byte) in bytes.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { text.append(UInt8(ascii: "-")) }
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Whether `text` is a UUID in canonical 36-character form (any version).
    public static func isValid(_ text: String) -> Bool {
        UUID(uuidString: text) != nil && text.count == 36
    }
}
