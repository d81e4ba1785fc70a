/// Base64 for the `bytes` fields of the JSON mapping: standard with padding on output; standard or
/// URL-safe, padded or not, on input (RFC 4648 §4 and §5).
enum JSONBase64 {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    /// Both alphabets: `+`/`-` are 62, `/`/`_` are 63; 0xFF elsewhere.
    private static let reverse: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        table[Int(UInt8(ascii: "-"))] = 62
        table[Int(UInt8(ascii: "_"))] = 63
        return table
    }()

    /// Appends `bytes` in standard base64 with padding.
    static func encode(_ bytes: UnsafeRawBufferPointer, into out: inout OutputBuffer) {
        alphabet.withUnsafeBufferPointer { alphabet in
            var index = 0
            let count = bytes.count
            while index + 3 <= count {
                let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
                out.append(alphabet[Int(value >> 18 & 63)])
                out.append(alphabet[Int(value >> 12 & 63)])
                out.append(alphabet[Int(value >> 6 & 63)])
                out.append(alphabet[Int(value & 63)])
                index += 3
            }
            let rest = count - index
            if rest > 0 {
                var value = UInt32(bytes[index]) << 16
                if rest == 2 { value |= UInt32(bytes[index + 1]) << 8 }
                out.append(alphabet[Int(value >> 18 & 63)])
                out.append(alphabet[Int(value >> 12 & 63)])
                out.append(rest == 2 ? alphabet[Int(value >> 6 & 63)] : UInt8(ascii: "="))
                out.append(UInt8(ascii: "="))
            }
        }
    }

    /// Appends the decoded `text`; false for characters outside both alphabets, misplaced padding or
    /// a length no encoding has.
    static func decode(_ text: UnsafeRawBufferPointer, into out: inout OutputBuffer) -> Bool {
        var count = text.count
        // Padding only at the end, and only to complete a group of four.
        var padding = 0
        while count > 0 && text[count - 1] == UInt8(ascii: "=") && padding < 2 {
            count -= 1
            padding += 1
        }
        if padding > 0 && (count + padding) % 4 != 0 { return false }
        if count % 4 == 1 { return false }
        return reverse.withUnsafeBufferPointer { reverse in
            var accumulator: UInt32 = 0
            var bits = 0
            for index in 0..<count {
                let value = reverse[Int(text[index])]
                if value == 0xFF { return false }
                accumulator = accumulator << 6 | UInt32(value)
                bits += 6
                if bits >= 8 {
                    bits -= 8
                    out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                }
            }
            return true
        }
    }
}
