/// UTF-8 as RFC 3629 defines it: no overlong forms, no surrogates, nothing past U+10FFFF.
enum UTF8Validation {
    /// The length of the well-formed multi-byte sequence starting at `position` (whose first byte is
    /// 0x80 or above), or nil.
    @inline(__always)
    static func sequenceLength(_ bytes: UnsafeRawBufferPointer, at position: Int, end: Int) -> Int? {
        let first = bytes[position]
        let available = end - position
        @inline(__always) func continuation(_ offset: Int, _ low: UInt8 = 0x80, _ high: UInt8 = 0xBF) -> Bool {
            offset < available && (low...high).contains(bytes[position + offset])
        }
        switch first {
        case 0xC2...0xDF:
            return continuation(1) ? 2 : nil
        case 0xE0:
            return continuation(1, 0xA0) && continuation(2) ? 3 : nil
        case 0xE1...0xEC, 0xEE...0xEF:
            return continuation(1) && continuation(2) ? 3 : nil
        case 0xED:
            return continuation(1, 0x80, 0x9F) && continuation(2) ? 3 : nil
        case 0xF0:
            return continuation(1, 0x90) && continuation(2) && continuation(3) ? 4 : nil
        case 0xF1...0xF3:
            return continuation(1) && continuation(2) && continuation(3) ? 4 : nil
        case 0xF4:
            return continuation(1, 0x80, 0x8F) && continuation(2) && continuation(3) ? 4 : nil
        default:
            return nil
        }
    }
}
