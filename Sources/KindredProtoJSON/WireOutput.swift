/// Writing protobuf wire format.
extension OutputBuffer {
    @inline(__always)
    mutating func appendVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        append(UInt8(value))
    }

    @inline(__always)
    mutating func appendTag(_ number: Int32, _ wireType: UInt8) {
        appendVarint(UInt64(UInt32(bitPattern: number)) << 3 | UInt64(wireType))
    }

    @inline(__always)
    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        var value = value.littleEndian
        Swift.withUnsafeBytes(of: &value) { append($0) }
    }

    /// Reserves one byte for the length of a length-delimited value that follows; returns its position.
    @inline(__always)
    mutating func beginLength() -> Int {
        append(0)
        return count - 1
    }

    /// Writes the length of everything after `position` (from `beginLength`), widening the varint when
    /// the value is 128 bytes or longer.
    mutating func endLength(at position: Int) {
        let length = count - position - 1
        if length < 0x80 {
            self[position] = UInt8(length)
            return
        }
        var size = 1
        var rest = length >> 7
        while rest > 0 {
            size += 1
            rest >>= 7
        }
        openGap(at: position + 1, size - 1)
        var value = length
        for offset in 0..<size {
            self[position + offset] = UInt8(truncatingIfNeeded: value) | (offset < size - 1 ? 0x80 : 0)
            value >>= 7
        }
    }
}
