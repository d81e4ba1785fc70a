/// Reads JSON (RFC 8259) token by token from UTF-8 bytes, for a reader that knows what it expects
/// next (the message schema says which). Errors carry the byte offset.
struct JSONScanner {
    let bytes: UnsafeRawBufferPointer
    var position = 0

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// The next byte after whitespace, without consuming it; nil at the end.
    @inline(__always)
    mutating func peek() -> UInt8? {
        while position < bytes.count {
            let byte = bytes[position]
            guard byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 else { return byte }
            position += 1
        }
        return nil
    }

    /// Consumes `byte` (after whitespace) if it is next.
    @inline(__always)
    mutating func consume(_ byte: UInt8) -> Bool {
        if peek() == byte {
            position += 1
            return true
        }
        return false
    }

    mutating func expect(_ byte: UInt8, _ what: String) throws(ProtoJSONError) {
        guard consume(byte) else { throw unexpected(what) }
    }

    /// The error for finding something else than `what` at the current position.
    mutating func unexpected(_ what: String) -> ProtoJSONError {
        guard let byte = peek() else { return .syntax("expected \(what), found the end of the input", at: position) }
        if byte >= 0x80 && UTF8Validation.sequenceLength(bytes, at: position, end: bytes.count) == nil {
            return .syntax("invalid UTF-8", at: position)
        }
        return .syntax("expected \(what)", at: position)
    }

    /// Consumes `null` if it is next.
    mutating func consumeNull() throws(ProtoJSONError) -> Bool {
        guard peek() == UInt8(ascii: "n") else { return false }
        try literal("null")
        return true
    }

    /// `true` or `false`, or nil (nothing consumed) when neither is next.
    mutating func consumeBool() throws(ProtoJSONError) -> Bool? {
        switch peek() {
        case UInt8(ascii: "t"):
            try literal("true")
            return true
        case UInt8(ascii: "f"):
            try literal("false")
            return false
        default:
            return nil
        }
    }

    private mutating func literal(_ text: StaticString) throws(ProtoJSONError) {
        let count = text.utf8CodeUnitCount
        let start = position
        guard bytes.count - position >= count else { throw .syntax("invalid literal", at: start) }
        for index in 0..<count where bytes[position + index] != text.utf8Start[index] {
            throw .syntax("invalid literal", at: start)
        }
        position += count
        if position < bytes.count, Self.isIdentifierByte(bytes[position]) { throw .syntax("invalid literal", at: start) }
    }

    private static func isIdentifierByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
    }

    /// Whether `byte` stands for itself inside a JSON string: not a quote, backslash, control
    /// character or part of a multi-byte sequence.
    @inline(__always)
    static func isPlain(_ byte: UInt8) -> Bool {
        byte >= 0x20 && byte < 0x80 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
    }

    /// Whether a string is next.
    @inline(__always)
    mutating func atString() -> Bool { peek() == UInt8(ascii: "\"") }

    /// Whether a number is next.
    @inline(__always)
    mutating func atNumber() -> Bool {
        guard let byte = peek() else { return false }
        return byte == UInt8(ascii: "-") || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
    }

    /// Reads a string (the opening quote is next) and appends its decoded UTF-8 to `out`.
    mutating func readString(into out: inout OutputBuffer) throws(ProtoJSONError) {
        guard consume(UInt8(ascii: "\"")) else { throw unexpected("a string") }
        let end = bytes.count
        while true {
            // Copy a run of plain characters at once.
            let runStart = position
            while position < end && Self.isPlain(bytes[position]) { position += 1 }
            if position > runStart { out.append(UnsafeRawBufferPointer(rebasing: bytes[runStart..<position])) }
            guard position < end else { throw .syntax("unterminated string", at: position) }
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                return
            case UInt8(ascii: "\\"):
                try escape(into: &out)
            case 0x80...:
                guard let length = UTF8Validation.sequenceLength(bytes, at: position, end: end) else {
                    throw .syntax("invalid UTF-8", at: position)
                }
                out.append(UnsafeRawBufferPointer(rebasing: bytes[position..<position + length]))
                position += length
            default:
                throw .syntax("control character in a string (escape it)", at: position)
            }
        }
    }

    private mutating func escape(into out: inout OutputBuffer) throws(ProtoJSONError) {
        let start = position
        position += 1
        guard position < bytes.count else { throw .syntax("unterminated string", at: position) }
        let byte = bytes[position]
        position += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(byte)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hex4()
            if (0xD800...0xDBFF).contains(scalar) {
                // A high surrogate must be followed by an escaped low one.
                guard bytes.count - position >= 6, bytes[position] == UInt8(ascii: "\\"),
                    bytes[position + 1] == UInt8(ascii: "u")
                else { throw .syntax("unpaired surrogate in a \\u escape", at: start) }
                position += 2
                let low = try hex4()
                guard (0xDC00...0xDFFF).contains(low) else { throw .syntax("unpaired surrogate in a \\u escape", at: start) }
                scalar = 0x10000 + (scalar - 0xD800) << 10 + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw .syntax("unpaired surrogate in a \\u escape", at: start)
            }
            Self.appendUTF8(scalar, to: &out)
        default:
            throw .syntax("invalid escape in a string", at: start)
        }
    }

    private mutating func hex4() throws(ProtoJSONError) -> UInt32 {
        guard bytes.count - position >= 4 else { throw .syntax("invalid \\u escape", at: position) }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw .syntax("invalid \\u escape", at: position)
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }

    private static func appendUTF8(_ scalar: UInt32, to out: inout OutputBuffer) {
        switch scalar {
        case 0..<0x80:
            out.append(UInt8(scalar))
        case 0x80..<0x800:
            out.append(UInt8(0xC0 | scalar >> 6))
            out.append(UInt8(0x80 | scalar & 0x3F))
        case 0x800..<0x10000:
            out.append(UInt8(0xE0 | scalar >> 12))
            out.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            out.append(UInt8(0x80 | scalar & 0x3F))
        default:
            out.append(UInt8(0xF0 | scalar >> 18))
            out.append(UInt8(0x80 | scalar >> 12 & 0x3F))
            out.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            out.append(UInt8(0x80 | scalar & 0x3F))
        }
    }

    /// Reads a number token (one is next) and returns its bytes' range, checked against JSON's grammar:
    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    mutating func readNumber() throws(ProtoJSONError) -> Range<Int> {
        _ = peek()
        let start = position
        guard let end = JSONNumber.scan(bytes, from: position, to: bytes.count), end > start else {
            throw .syntax("invalid number", at: start)
        }
        position = end
        if position < bytes.count, Self.isIdentifierByte(bytes[position]) || bytes[position] == UInt8(ascii: ".") {
            throw .syntax("invalid number", at: start)
        }
        return start..<end
    }

    /// Fails unless only whitespace is left.
    mutating func expectEnd() throws(ProtoJSONError) {
        if peek() != nil { throw unexpected("the end of the input") }
    }
}
