/// Checks how deeply the messages in an encoded message nest, before protobuf-c unpacks it.
///
/// protobuf-c unpacks sub-messages recursively without a depth limit, so a few megabytes of nested
/// length prefixes would overflow the stack. Only message types that can contain themselves can
/// nest deeper than their schema; `ProtobufC.unpack` scans those.
enum WireScanner {
    static func checkNesting(_ bytes: UnsafeRawBufferPointer, layout: MessageLayout) throws(ProtoError) {
        var scanner = Scanner(bytes: bytes)
        do {
            try scanner.scan(layout, end: bytes.count, depth: 1)
        } catch {
            throw ProtoError(code: error.code, messageName: layout.name)
        }
    }

    private struct Scanner {
        let bytes: UnsafeRawBufferPointer
        var position = 0

        mutating func scan(_ layout: MessageLayout, end: Int, depth: Int) throws(ProtoError) {
            guard depth <= ProtoDecodingLimits.maximumNesting else { throw ProtoError(code: .nestingTooDeep) }
            while position < end {
                let tag = try varint(end: end)
                guard tag >> 3 <= UInt64(Int32.max) else { throw ProtoError(code: .malformed) }
                switch tag & 7 {
                case 0: _ = try varint(end: end)
                case 1: try skip(8, end: end)
                case 5: try skip(4, end: end)
                case 2:
                    let length = try varint(end: end)
                    guard length <= UInt64(end - position) else { throw ProtoError(code: .malformed) }
                    let fieldEnd = position + Int(length)
                    if let field = layout.fieldIfPresent(Int32(tag >> 3)), let message = field.pointee.message {
                        try scan(message, end: fieldEnd, depth: depth + 1)
                    }
                    position = fieldEnd
                default:
                    // Groups (3, 4) and wire types 6, 7: protobuf-c rejects them as well.
                    throw ProtoError(code: .malformed)
                }
            }
        }

        private mutating func varint(end: Int) throws(ProtoError) -> UInt64 {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while position < end && shift < 64 {
                let byte = bytes[position]
                position += 1
                result |= UInt64(byte & 0x7f) << shift
                if byte < 0x80 { return result }
                shift += 7
            }
            throw ProtoError(code: .malformed)
        }

        private mutating func skip(_ count: Int, end: Int) throws(ProtoError) {
            guard count <= end - position else { throw ProtoError(code: .malformed) }
            position += count
        }
    }
}
