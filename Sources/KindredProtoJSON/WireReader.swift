/// Reads protobuf wire format: varints, fixed-width values and length-delimited ranges, never
/// past `end`. Every method returns nil on truncated or malformed input.
struct WireReader {
    let bytes: UnsafeRawBufferPointer
    var position: Int
    var end: Int

    init(_ bytes: UnsafeRawBufferPointer, from start: Int = 0, to end: Int? = nil) {
        self.bytes = bytes
        self.position = start
        self.end = end ?? bytes.count
    }

    var isAtEnd: Bool { position >= end }

    @inline(__always)
    mutating func varint() -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while position < end {
            let byte = bytes[position]
            position += 1
            if shift == 63 && byte > 1 { return nil }  // more than 64 bits
            result |= UInt64(byte & 0x7f) << shift
            if byte < 0x80 { return result }
            shift += 7
            if shift > 63 { return nil }
        }
        return nil
    }

    @inline(__always)
    mutating func fixed32() -> UInt32? {
        guard end - position >= 4 else { return nil }
        let value = bytes.loadUnaligned(fromByteOffset: position, as: UInt32.self)
        position += 4
        return UInt32(littleEndian: value)
    }

    @inline(__always)
    mutating func fixed64() -> UInt64? {
        guard end - position >= 8 else { return nil }
        let value = bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self)
        position += 8
        return UInt64(littleEndian: value)
    }

    /// A length-delimited value's range; the reader moves past it.
    @inline(__always)
    mutating func lengthDelimited() -> Range<Int>? {
        guard let length = varint(), length <= UInt64(end - position) else { return nil }
        let start = position
        position += Int(length)
        return start..<position
    }

    /// Skips one value of `wireType`; false for groups, unknown wire types and truncated input.
    mutating func skip(wireType: UInt8) -> Bool {
        switch wireType {
        case 0: return varint() != nil
        case 1: return fixed64() != nil
        case 2: return lengthDelimited() != nil
        case 5: return fixed32() != nil
        default: return false
        }
    }
}
