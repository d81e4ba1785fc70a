/// Writing JSON values.
extension OutputBuffer {
    @inline(__always)
    mutating func appendASCII(_ text: StaticString) {
        append(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    mutating func appendDecimal(_ value: UInt64) {
        if value < 10 {
            append(UInt8(ascii: "0") + UInt8(value))
            return
        }
        let start = count
        var value = value
        while value > 0 {
            append(UInt8(ascii: "0") + UInt8(value % 10))
            value /= 10
        }
        reverse(from: start)
    }

    mutating func appendDecimal(_ value: Int64) {
        if value < 0 { append(UInt8(ascii: "-")) }
        appendDecimal(value.magnitude)
    }

    /// A double as the shortest text that reads back as the same value; "NaN", "Infinity" and
    /// "-Infinity" as strings.
    mutating func appendJSON(_ value: Double) {
        if value.isNaN {
            appendASCII("\"NaN\"")
        } else if value.isInfinite {
            appendASCII(value < 0 ? "\"-Infinity\"" : "\"Infinity\"")
        } else {
            appendDescription(value)
        }
    }

    /// A float as the shortest text that reads back as the same float.
    mutating func appendJSON(_ value: Float) {
        if value.isNaN {
            appendASCII("\"NaN\"")
        } else if value.isInfinite {
            appendASCII(value < 0 ? "\"-Infinity\"" : "\"Infinity\"")
        } else {
            appendDescription(value)
        }
    }

    private mutating func appendDescription(_ value: some CustomStringConvertible) {
        var text = value.description
        text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    /// `bytes` as a JSON string; false (with some of it written) when they are not UTF-8.
    mutating func appendJSONString(_ bytes: UnsafeRawBufferPointer) -> Bool {
        append(UInt8(ascii: "\""))
        var position = 0
        let end = bytes.count
        while position < end {
            let runStart = position
            while position < end && JSONScanner.isPlain(bytes[position]) { position += 1 }
            if position > runStart { append(UnsafeRawBufferPointer(rebasing: bytes[runStart..<position])) }
            guard position < end else { break }
            let byte = bytes[position]
            if byte >= 0x80 {
                guard let length = UTF8Validation.sequenceLength(bytes, at: position, end: end) else { return false }
                append(UnsafeRawBufferPointer(rebasing: bytes[position..<position + length]))
                position += length
                continue
            }
            append(UInt8(ascii: "\\"))
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): append(byte)
            case 0x08: append(UInt8(ascii: "b"))
            case 0x0C: append(UInt8(ascii: "f"))
            case 0x0A: append(UInt8(ascii: "n"))
            case 0x0D: append(UInt8(ascii: "r"))
            case 0x09: append(UInt8(ascii: "t"))
            default:
                let hex: StaticString = "0123456789abcdef"
                appendASCII("u00")
                append(hex.utf8Start[Int(byte >> 4)])
                append(hex.utf8Start[Int(byte & 15)])
            }
            position += 1
        }
        append(UInt8(ascii: "\""))
        return true
    }
}
