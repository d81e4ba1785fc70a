/// Random messages of any generated type, for tests (`@_spi(Testing) import KindredProtobuf`).
///
/// Fills the protobuf-c struct of the message type directly, following its descriptor, and reads
/// it back through the generated `init(decoder:)`; so it needs nothing from generated code beyond
/// what encoding and decoding use, and covers every field of every type.
@_spi(Testing)
public enum ProtoRandom {
    /// A `M` with random values: about half of the fields set, repeated and map fields with up to
    /// three elements, one member or none of each oneof, enums with known and unknown numbers,
    /// strings of any Unicode scalars (U+0000 included), integers across their range, finite
    /// floats and infinities (no NaN, so that `==` holds). Messages nest at most `maximumDepth`
    /// levels.
    public static func message<M: ProtoMessage>(
        _ type: M.Type,
        using generator: inout some RandomNumberGenerator,
        maximumDepth: Int = 3
    ) throws(ProtoError) -> M {
        let layout = M.protoMessageLayout.layout
        return try withUnsafeTemporaryAllocation(byteCount: 4096, alignment: 16) { stack throws(ProtoError) in
            let arena = Arena.create(in: stack, limit: .max)
            defer { arena.deinitialize(count: 1) }
            let filler = Filler(arena: arena, maximumDepth: maximumDepth)
            let base = filler.makeMessage(layout, depth: 1, using: &generator)
            return try M(decoder: ProtoDecoder(base: base, layout: layout))
        }
    }

    private struct Filler {
        let arena: UnsafeMutablePointer<Arena>
        let maximumDepth: Int

        func allocate(_ byteCount: Int, alignment: Int = 16) -> UnsafeMutableRawPointer {
            arena.pointee.allocate(byteCount: Swift.max(byteCount, 1), alignment: alignment)!
        }

        func makeMessage(_ layout: MessageLayout, depth: Int, using generator: inout some RandomNumberGenerator)
            -> UnsafeMutableRawPointer
        {
            let base = allocate(layout.size)
            base.copyMemory(from: layout.initialValue, byteCount: layout.size)
            // One member (or none) per oneof; members of one oneof share the case offset.
            var chosen: [Int: Int32] = [:]
            for field in layout.fields where field.shape.isOneof && chosen[field.quantifierOffset] == nil {
                let members = layout.fields.filter { $0.shape.isOneof && $0.quantifierOffset == field.quantifierOffset }
                chosen[field.quantifierOffset] =
                    Bool.random(using: &generator) ? members.randomElement(using: &generator)!.number : 0
            }
            for field in layout.fields {
                let deeper = depth < maximumDepth
                if field.shape.isOneof {
                    guard chosen[field.quantifierOffset] == field.number else { continue }
                    if field.storage == .message && !deeper { continue }
                    (base + field.quantifierOffset).storeBytes(of: UInt32(bitPattern: field.number), as: UInt32.self)
                    storeValue(field, at: base + field.offset, depth: depth, using: &generator)
                } else if field.shape.isRepeated {
                    let count = field.storage == .message && !deeper ? 0 : Int.random(in: 0...3, using: &generator)
                    guard count > 0 else { continue }
                    let array = allocate(count * field.storage.elementSize)
                    for index in 0..<count {
                        storeValue(
                            field,
                            at: array + index * field.storage.elementSize,
                            depth: depth,
                            using: &generator
                        )
                    }
                    (base + field.quantifierOffset).storeBytes(of: count, as: Int.self)
                    (base + field.offset).storeBytes(of: array, as: UnsafeMutableRawPointer.self)
                } else if Bool.random(using: &generator) {
                    if field.storage == .message && !deeper { continue }
                    storeValue(field, at: base + field.offset, depth: depth, using: &generator)
                }
            }
            return base
        }

        func storeValue(
            _ field: FieldLayout,
            at address: UnsafeMutableRawPointer,
            depth: Int,
            using generator: inout some RandomNumberGenerator
        ) {
            switch field.storage {
            case .int32: address.storeBytes(of: Int32(truncatingIfNeeded: integer(using: &generator)), as: Int32.self)
            case .int64: address.storeBytes(of: Int64(truncatingIfNeeded: integer(using: &generator)), as: Int64.self)
            case .uint32:
                address.storeBytes(of: UInt32(truncatingIfNeeded: integer(using: &generator)), as: UInt32.self)
            case .uint64:
                address.storeBytes(of: UInt64(truncatingIfNeeded: integer(using: &generator)), as: UInt64.self)
            case .float: address.storeBytes(of: Float(double(using: &generator)), as: Float.self)
            case .double: address.storeBytes(of: double(using: &generator), as: Double.self)
            case .bool: address.storeBytes(of: Int32(Bool.random(using: &generator) ? 1 : 0), as: Int32.self)
            case .enumeration:
                // Mostly small numbers, known or not; sometimes anything.
                let value =
                    Int.random(in: 0..<8, using: &generator) == 0
                    ? Int32.random(in: .min ... .max, using: &generator) : Int32.random(in: -2...6, using: &generator)
                address.storeBytes(of: value, as: Int32.self)
            case .string:
                var utf8: [UInt8] = []
                for _ in 0..<Int.random(in: 0...8, using: &generator) {
                    utf8.append(contentsOf: String(Character(scalar(using: &generator))).utf8)
                }
                let string = arena.pointee.allocateRecordingSize(byteCount: utf8.count + 1)!
                utf8.withUnsafeBytes { string.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                string.storeBytes(of: 0, toByteOffset: utf8.count, as: UInt8.self)
                address.storeBytes(of: string, as: UnsafeMutableRawPointer.self)
            case .bytes:
                let count = Int.random(in: 0...8, using: &generator)
                let data = allocate(count, alignment: 1)
                for index in 0..<count {
                    data.storeBytes(
                        of: UInt8.random(in: 0...255, using: &generator),
                        toByteOffset: index,
                        as: UInt8.self
                    )
                }
                address.storeBytes(of: count, as: Int.self)
                address.storeBytes(of: data, toByteOffset: 8, as: UnsafeMutableRawPointer.self)
            case .message:
                let message = makeMessage(field.message!, depth: depth + 1, using: &generator)
                address.storeBytes(of: message, as: UnsafeMutableRawPointer.self)
            }
        }

        /// Edge values or uniform 64 random bits; callers truncate.
        func integer(using generator: inout some RandomNumberGenerator) -> UInt64 {
            let edges: [UInt64] = [
                0, 1, 2, 127, 128, 300, UInt64(bitPattern: -1), UInt64(bitPattern: -2), 1 << 31, (1 << 31) - 1, 1 << 63,
                (1 << 63) - 1,
            ]
            return Bool.random(using: &generator) ? edges.randomElement(using: &generator)! : generator.next()
        }

        func double(using generator: inout some RandomNumberGenerator) -> Double {
            let edges: [Double] = [
                0, -0.0, 1, -1, 0.5, .infinity, -.infinity, .leastNonzeroMagnitude, .greatestFiniteMagnitude, 1e-300,
                3.4e38, 1.5e-45,
            ]
            if Bool.random(using: &generator) { return edges.randomElement(using: &generator)! }
            return Double.random(in: -1e9...1e9, using: &generator)
        }

        func scalar(using generator: inout some RandomNumberGenerator) -> Unicode.Scalar {
            while true {
                let value: UInt32
                switch Int.random(in: 0..<4, using: &generator) {
                case 0: value = UInt32.random(in: 0...0x7f, using: &generator)  // ASCII, NUL included
                case 1: value = UInt32.random(in: 0x80...0x7ff, using: &generator)
                case 2: value = UInt32.random(in: 0x800...0xffff, using: &generator)
                default: value = UInt32.random(in: 0x10000...0x10ffff, using: &generator)
                }
                if let scalar = Unicode.Scalar(value) { return scalar }  // not a surrogate
            }
        }
    }
}
