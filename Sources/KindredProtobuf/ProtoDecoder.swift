#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Reads a message's fields from the struct protobuf-c unpacked.
///
/// Generated `init(decoder:)` initialisers call one getter per field, by field number. Absent
/// fields read as their default. Strings are checked to be UTF-8. Each getter checks that the C
/// field has the expected type and traps otherwise (generated Swift and C code out of step).
public struct ProtoDecoder: ~Copyable {
    private let base: UnsafeRawPointer
    private let layout: MessageLayout

    init(base: UnsafeRawPointer, layout: MessageLayout) {
        self.base = base
        self.layout = layout
    }

    // MARK: Singular fields and oneof members

    /// Reads an `int32`, `sint32` or `sfixed32` field.
    public func int32(_ number: Int32) -> Int32 { load(number, .int32) }
    /// Reads an `int64`, `sint64` or `sfixed64` field.
    public func int64(_ number: Int32) -> Int64 { load(number, .int64) }
    /// Reads a `uint32` or `fixed32` field.
    public func uint32(_ number: Int32) -> UInt32 { load(number, .uint32) }
    /// Reads a `uint64` or `fixed64` field.
    public func uint64(_ number: Int32) -> UInt64 { load(number, .uint64) }
    public func float(_ number: Int32) -> Float { load(number, .float) }
    public func double(_ number: Int32) -> Double { load(number, .double) }
    public func bool(_ number: Int32) -> Bool { load(number, .bool) as Int32 != 0 }

    public func enumValue<E: ProtoEnum>(_ number: Int32, as type: E.Type = E.self) -> E {
        E(rawValue: load(number, .enumeration))
    }

    public func string(_ number: Int32) throws(ProtoError) -> String {
        let field = layout.fieldForReading(number, FieldShape(.string))
        let string = (base + field.pointee.offset).load(as: UnsafeRawPointer?.self)
        guard let string, string != field.pointee.defaultString else { return "" }
        return try makeString(string)
    }

    public func bytes(_ number: Int32) -> [UInt8] {
        let field = layout.fieldForReading(number, FieldShape(.bytes))
        return makeBytes(base + field.pointee.offset)
    }

    /// Reads a message field; `nil` when absent.
    public func message<M: ProtoMessage>(_ number: Int32, as type: M.Type = M.self) throws(ProtoError) -> M? {
        let field = layout.fieldForReading(number, FieldShape(.message))
        guard let message = (base + field.pointee.offset).load(as: UnsafeRawPointer?.self) else { return nil }
        return try makeMessage(message, field.pointee.message!)
    }

    /// The field number of the member set in the oneof that field `number` belongs to, or 0.
    public func oneofCase(_ number: Int32) -> Int32 {
        let field = layout.lookup(number)
        precondition(field.pointee.shape.isOneof, "protobuf field is not a oneof member")
        return Int32(bitPattern: (base + field.pointee.quantifierOffset).load(as: UInt32.self))
    }

    // MARK: Repeated fields

    public func repeatedInt32(_ number: Int32) -> [Int32] { loadRepeated(number, .int32) }
    public func repeatedInt64(_ number: Int32) -> [Int64] { loadRepeated(number, .int64) }
    public func repeatedUInt32(_ number: Int32) -> [UInt32] { loadRepeated(number, .uint32) }
    public func repeatedUInt64(_ number: Int32) -> [UInt64] { loadRepeated(number, .uint64) }
    public func repeatedFloat(_ number: Int32) -> [Float] { loadRepeated(number, .float) }
    public func repeatedDouble(_ number: Int32) -> [Double] { loadRepeated(number, .double) }

    public func repeatedBool(_ number: Int32) -> [Bool] {
        let (array, count) = repeated(number, .bool)
        let values = array.assumingMemoryBound(to: Int32.self)
        return (0..<count).map { values[$0] != 0 }
    }

    public func repeatedEnum<E: ProtoEnum>(_ number: Int32, as type: E.Type = E.self) -> [E] {
        let (array, count) = repeated(number, .enumeration)
        let values = array.assumingMemoryBound(to: Int32.self)
        return (0..<count).map { E(rawValue: values[$0]) }
    }

    public func repeatedString(_ number: Int32) throws(ProtoError) -> [String] {
        let (array, count) = repeated(number, .string)
        var result: [String] = []
        result.reserveCapacity(count)
        for index in 0..<count {
            // Repeated elements are always allocated by the unpacker, never the default "".
            result.append(try makeString(array.load(fromByteOffset: 8 * index, as: UnsafeRawPointer.self)))
        }
        return result
    }

    public func repeatedBytes(_ number: Int32) -> [[UInt8]] {
        let (array, count) = repeated(number, .bytes)
        return (0..<count).map { makeBytes(array + 16 * $0) }
    }

    public func repeatedMessage<M: ProtoMessage>(_ number: Int32, as type: M.Type = M.self) throws(ProtoError) -> [M] {
        let field = layout.fieldForReading(number, FieldShape(.message, repeated: true))
        let (array, count) = repeated(field)
        let messageLayout = field.pointee.message!
        var result: [M] = []
        result.reserveCapacity(count)
        for index in 0..<count {
            result.append(
                try makeMessage(array.load(fromByteOffset: 8 * index, as: UnsafeRawPointer.self), messageLayout)
            )
        }
        return result
    }

    /// Reads a map field: `decodeEntry` reads the key (field 1) and value (field 2) of each entry
    /// message. A key that occurs twice keeps its last value, as protobuf requires.
    public func map<Key: Hashable, Value>(
        _ number: Int32,
        _ decodeEntry: (borrowing ProtoDecoder) throws(ProtoError) -> (Key, Value)
    ) throws(ProtoError) -> [Key: Value] {
        let field = layout.fieldForReading(number, FieldShape(.message, repeated: true))
        let (array, count) = repeated(field)
        guard count > 0 else { return [:] }
        let entryLayout = field.pointee.message!
        var result: [Key: Value] = [:]
        result.reserveCapacity(count)
        for index in 0..<count {
            let entry = ProtoDecoder(
                base: array.load(fromByteOffset: 8 * index, as: UnsafeRawPointer.self),
                layout: entryLayout
            )
            let (key, value) = try decodeEntry(entry)
            result[key] = value
        }
        return result
    }

    // MARK: Helpers

    @inline(__always)
    private func load<T: BitwiseCopyable>(_ number: Int32, _ storage: FieldStorage) -> T {
        let field = layout.fieldForReading(number, FieldShape(storage))
        return (base + field.pointee.offset).load(as: T.self)
    }

    private func loadRepeated<T: BitwiseCopyable>(_ number: Int32, _ storage: FieldStorage) -> [T] {
        let (array, count) = repeated(number, storage)
        guard count > 0 else { return [] }
        return [T](UnsafeBufferPointer(start: array.assumingMemoryBound(to: T.self), count: count))
    }

    @inline(__always)
    private func repeated(_ number: Int32, _ storage: FieldStorage) -> (UnsafeRawPointer, Int) {
        repeated(layout.fieldForReading(number, FieldShape(storage, repeated: true)))
    }

    @inline(__always)
    private func repeated(_ field: UnsafeMutablePointer<FieldLayout>) -> (UnsafeRawPointer, Int) {
        let count = (base + field.pointee.quantifierOffset).load(as: Int.self)
        guard count > 0, let array = (base + field.pointee.offset).load(as: UnsafeRawPointer?.self) else {
            return (base, 0)
        }
        return (array, count)
    }

    private func makeString(_ string: UnsafeRawPointer) throws(ProtoError) -> String {
        let characters = string.assumingMemoryBound(to: CChar.self)
        let length = strlen(characters)
        // The unpacker allocated length + 1 bytes: a longer recorded size means U+0000 inside.
        var count = length
        if let size = Arena.recordedSize(of: string), size > length + 1,
            string.load(fromByteOffset: size - 1, as: UInt8.self) == 0
        {
            count = size - 1
        }
        let result: String?
        if count == length {
            // Not generic, unlike String(validating:as:), which looks up metadata on every call.
            result = String(validatingCString: characters)
        } else {
            result = String(validating: UnsafeRawBufferPointer(start: string, count: count), as: UTF8.self)
        }
        guard let result else { throw ProtoError(code: .invalidUTF8, messageName: layout.name) }
        return result
    }

    private func makeBytes(_ field: UnsafeRawPointer) -> [UInt8] {
        // ProtobufCBinaryData is { size_t len; uint8_t *data; }.
        let count = field.load(as: Int.self)
        guard count > 0, let data = field.load(fromByteOffset: 8, as: UnsafeRawPointer?.self) else { return [] }
        return [UInt8](UnsafeRawBufferPointer(start: data, count: count))
    }

    private func makeMessage<M: ProtoMessage>(_ message: UnsafeRawPointer, _ messageLayout: MessageLayout)
        throws(ProtoError) -> M
    {
        precondition(
            messageLayout.storage == M.protoMessageLayout.layout.storage,
            "protobuf message field of another type"
        )
        return try M(decoder: ProtoDecoder(base: message, layout: messageLayout))
    }
}
