/// Percent-encoding of `grpc-message` (gRPC over HTTP/2: bytes outside 0x20...0x7E and `%` are `%XX` of the
/// UTF-8 encoding). Decoding is lenient: an invalid escape is kept as is.
enum PercentEncoding {
    static func encode(_ message: String) -> String {
        let utf8 = message.utf8
        if utf8.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E && $0 != UInt8(ascii: "%") }) { return message }
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count * 3)
        for byte in utf8 {
            if byte >= 0x20 && byte <= 0x7E && byte != UInt8(ascii: "%") {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(_ message: String) -> String {
        guard message.utf8.contains(UInt8(ascii: "%")) else { return message }
        let bytes = Array(message.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
                let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2])
            {
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// The `grpc-timeout` header: at most 8 ASCII digits followed by a unit (H, M, S, m, u, n).
public enum GRPCTimeout {
    /// Parses a header value into a duration; nil when malformed.
    public static func parse(_ value: String) -> Duration? {
        let utf8 = Array(value.utf8)
        guard utf8.count >= 2, utf8.count <= 9, let unit = utf8.last else { return nil }
        var amount: Int64 = 0
        for byte in utf8.dropLast() {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            amount = amount * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        switch unit {
        case UInt8(ascii: "H"): return .seconds(amount * 3600)
        case UInt8(ascii: "M"): return .seconds(amount * 60)
        case UInt8(ascii: "S"): return .seconds(amount)
        case UInt8(ascii: "m"): return .milliseconds(amount)
        case UInt8(ascii: "u"): return .microseconds(amount)
        case UInt8(ascii: "n"): return .nanoseconds(amount)
        default: return nil
        }
    }

    /// Formats a duration with the finest unit that fits in 8 digits (rounding up so a deadline is never
    /// shortened by the encoding). A duration that has run out encodes as 1n.
    public static func format(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return "1n" }
        let nanoseconds = Double(seconds) * 1e9 + Double(attoseconds) / 1e9
        let units: [(Double, String)] = [(1, "n"), (1e3, "u"), (1e6, "m"), (1e9, "S"), (60e9, "M"), (3600e9, "H")]
        for (scale, unit) in units {
            let amount = (nanoseconds / scale).rounded(.up)
            if amount < 100_000_000 { return "\(Int64(amount))\(unit)" }
        }
        return "99999999H"
    }
}
