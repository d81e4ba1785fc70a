/// Base64 (RFC 4648 §4) without Foundation: the one implementation the project uses for generated descriptors
/// (KindredProto) and for `-bin` metadata (KindredGRPC). Decoding accepts padded and unpadded input, as gRPC
/// requires, and skips ASCII whitespace (generated descriptors are wrapped over several lines).
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let reverse: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    public static func encode(_ bytes: [UInt8], padding: Bool) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= bytes.count {
            let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            out.append(alphabet[Int(value >> 18 & 63)])
            out.append(alphabet[Int(value >> 12 & 63)])
            out.append(alphabet[Int(value >> 6 & 63)])
            out.append(alphabet[Int(value & 63)])
            index += 3
        }
        let rest = bytes.count - index
        if rest > 0 {
            var value = UInt32(bytes[index]) << 16
            if rest == 2 { value |= UInt32(bytes[index + 1]) << 8 }
            out.append(alphabet[Int(value >> 18 & 63)])
            out.append(alphabet[Int(value >> 12 & 63)])
            if rest == 2 { out.append(alphabet[Int(value >> 6 & 63)]) }
            if padding { out.append(contentsOf: Array(repeating: UInt8(ascii: "="), count: 3 - rest)) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The decoded bytes; nil for characters outside the alphabet, data after padding, or a dangling character.
    public static func decode<S: StringProtocol>(_ text: S) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        var padding = 0
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                continue
            case UInt8(ascii: "="):
                padding += 1
            default:
                let value = reverse[Int(byte)]
                guard value != 0xFF, padding == 0 else { return nil }
                accumulator = accumulator << 6 | UInt32(value)
                bits += 6
                if bits >= 8 {
                    bits -= 8
                    out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                }
            }
        }
        guard padding <= 2, bits < 6 else { return nil }
        return out
    }
}
