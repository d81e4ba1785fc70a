#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Writes a message's fields into the protobuf-c struct that will be packed.
///
/// Generated `encode(to:)` methods call one setter per field, by field number. Setters skip
/// proto3 defaults (zero, empty), as the wire format requires; the `oneof:` variants always write,
/// since a oneof member is present even at its default. Each setter checks that the C field has
/// the expected type and traps otherwise (generated Swift and C code out of step).
///
/// Strings are copied as C strings. protobuf-c packs strings with `strlen`, so a string containing
/// U+0000 is instead written as an unknown field with the same number, which packs the same bytes.
public struct ProtoEncoder: ~Copyable {
    private let base: UnsafeMutableRawPointer
    private let layout: MessageLayout
    private let arena: UnsafeMutablePointer<Arena>

    init(base: UnsafeMutableRawPointer, layout: MessageLayout, arena: UnsafeMutablePointer<Arena>) {
        self.base = base
        self.layout = layout
        self.arena = arena
    }

    // MARK: Singular scalars

    /// Sets an `int32`, `sint32` or `sfixed32` field.
    public mutating func setInt32(_ number: Int32, _ value: Int32) {
        if value != 0 { store(value, number, .int32) }
    }

    /// Sets an `int64`, `sint64` or `sfixed64` field.
    public mutating func setInt64(_ number: Int32, _ value: Int64) {
        if value != 0 { store(value, number, .int64) }
    }

    /// Sets a `uint32` or `fixed32` field.
    public mutating func setUInt32(_ number: Int32, _ value: UInt32) {
        if value != 0 { store(value, number, .uint32) }
    }

    /// Sets a `uint64` or `fixed64` field.
    public mutating func setUInt64(_ number: Int32, _ value: UInt64) {
        if value != 0 { store(value, number, .uint64) }
    }

    /// Sets a `float` field. Only +0.0 is the default: -0.0 is written, as protobuf does.
    public mutating func setFloat(_ number: Int32, _ value: Float) {
        if value != 0 {
            store(value, number, .float)
        } else if value.sign == .minus {
            // protobuf-c would skip -0.0 as zero.
            _ = layout.field(number, FieldShape(.float))
            appendUnknown(number, .fixed32, value.bitPattern.littleEndian)
        }
    }

    /// Sets a `double` field. Only +0.0 is the default: -0.0 is written, as protobuf does.
    public mutating func setDouble(_ number: Int32, _ value: Double) {
        if value != 0 {
            store(value, number, .double)
        } else if value.sign == .minus {
            _ = layout.field(number, FieldShape(.double))
            appendUnknown(number, .fixed64, value.bitPattern.littleEndian)
        }
    }

    public mutating func setBool(_ number: Int32, _ value: Bool) {
        if value { store(Int32(1), number, .bool) }
    }

    public mutating func setEnum<E: ProtoEnum>(_ number: Int32, _ value: E) {
        let raw = value.rawValue
        if raw != 0 { store(raw, number, .enumeration) }
    }

    public mutating func setString(_ number: Int32, _ value: String) {
        guard !value.isEmpty else { return }
        let field = layout.field(number, FieldShape(.string))
        if let string = copyCString(value) {
            (base + field.pointee.offset).storeBytes(of: string, as: UnsafeMutableRawPointer.self)
        } else {
            appendUnknown(number, value)
        }
    }

    public mutating func setBytes(_ number: Int32, _ value: [UInt8]) {
        guard !value.isEmpty else { return }
        let field = layout.field(number, FieldShape(.bytes))
        storeBinary(value, at: base + field.pointee.offset)
    }

    /// Sets a message field; `nil` leaves it absent.
    public mutating func setMessage<M: ProtoMessage>(_ number: Int32, _ value: M?) {
        guard let value else { return }
        let field = layout.field(number, FieldShape(.message))
        let message = makeMessage(value, field.pointee.message!)
        (base + field.pointee.offset).storeBytes(of: message, as: UnsafeMutableRawPointer.self)
    }

    // MARK: Oneof members

    public mutating func setInt32(oneof number: Int32, _ value: Int32) { storeOneof(value, number, .int32) }
    public mutating func setInt64(oneof number: Int32, _ value: Int64) { storeOneof(value, number, .int64) }
    public mutating func setUInt32(oneof number: Int32, _ value: UInt32) { storeOneof(value, number, .uint32) }
    public mutating func setUInt64(oneof number: Int32, _ value: UInt64) { storeOneof(value, number, .uint64) }
    public mutating func setFloat(oneof number: Int32, _ value: Float) { storeOneof(value, number, .float) }
    public mutating func setDouble(oneof number: Int32, _ value: Double) { storeOneof(value, number, .double) }
    public mutating func setBool(oneof number: Int32, _ value: Bool) {
        storeOneof(Int32(value ? 1 : 0), number, .bool)
    }
    public mutating func setEnum<E: ProtoEnum>(oneof number: Int32, _ value: E) {
        storeOneof(value.rawValue, number, .enumeration)
    }

    public mutating func setString(oneof number: Int32, _ value: String) {
        let field = layout.field(number, FieldShape(.string, oneof: true))
        // Always a fresh copy: protobuf-c skips a oneof string that points at its default "".
        if let string = copyCString(value) {
            setCase(field)
            (base + field.pointee.offset).storeBytes(of: string, as: UnsafeMutableRawPointer.self)
        } else {
            appendUnknown(number, value)
        }
    }

    public mutating func setBytes(oneof number: Int32, _ value: [UInt8]) {
        let field = layout.field(number, FieldShape(.bytes, oneof: true))
        setCase(field)
        storeBinary(value, at: base + field.pointee.offset)
    }

    public mutating func setMessage<M: ProtoMessage>(oneof number: Int32, _ value: M) {
        let field = layout.field(number, FieldShape(.message, oneof: true))
        setCase(field)
        let message = makeMessage(value, field.pointee.message!)
        (base + field.pointee.offset).storeBytes(of: message, as: UnsafeMutableRawPointer.self)
    }

    // MARK: Repeated fields

    public mutating func setRepeatedInt32(_ number: Int32, _ values: [Int32]) {
        storeRepeated(values, number, .int32)
    }

    public mutating func setRepeatedInt64(_ number: Int32, _ values: [Int64]) {
        storeRepeated(values, number, .int64)
    }

    public mutating func setRepeatedUInt32(_ number: Int32, _ values: [UInt32]) {
        storeRepeated(values, number, .uint32)
    }

    public mutating func setRepeatedUInt64(_ number: Int32, _ values: [UInt64]) {
        storeRepeated(values, number, .uint64)
    }

    public mutating func setRepeatedFloat(_ number: Int32, _ values: [Float]) {
        storeRepeated(values, number, .float)
    }

    public mutating func setRepeatedDouble(_ number: Int32, _ values: [Double]) {
        storeRepeated(values, number, .double)
    }

    public mutating func setRepeatedBool(_ number: Int32, _ values: [Bool]) {
        guard !values.isEmpty else { return }
        let array = allocateRepeated(values.count, number, .bool).assumingMemoryBound(to: Int32.self)
        for (index, value) in values.enumerated() { array[index] = value ? 1 : 0 }
    }

    public mutating func setRepeatedEnum<E: ProtoEnum>(_ number: Int32, _ values: [E]) {
        guard !values.isEmpty else { return }
        let array = allocateRepeated(values.count, number, .enumeration).assumingMemoryBound(to: Int32.self)
        for (index, value) in values.enumerated() { array[index] = value.rawValue }
    }

    public mutating func setRepeatedString(_ number: Int32, _ values: [String]) {
        guard !values.isEmpty else { return }
        let field = layout.field(number, FieldShape(.string, repeated: true))
        let array = allocate(values.count * 8, alignment: 8).assumingMemoryBound(to: UnsafeMutableRawPointer.self)
        for (index, value) in values.enumerated() {
            guard let string = copyCString(value) else {
                // Keep the elements in order: write all of them as unknown fields.
                for value in values { appendUnknown(number, value) }
                return
            }
            array[index] = string
        }
        setRepeated(field, UnsafeMutableRawPointer(array), values.count)
    }

    public mutating func setRepeatedBytes(_ number: Int32, _ values: [[UInt8]]) {
        guard !values.isEmpty else { return }
        let array = allocateRepeated(values.count, number, .bytes)
        for (index, value) in values.enumerated() { storeBinary(value, at: array + 16 * index) }
    }

    public mutating func setRepeatedMessage<M: ProtoMessage>(_ number: Int32, _ values: [M]) {
        guard !values.isEmpty else { return }
        let field = layout.field(number, FieldShape(.message, repeated: true))
        let messageLayout = field.pointee.message!
        let array = allocate(values.count * 8, alignment: 8).assumingMemoryBound(to: UnsafeMutableRawPointer.self)
        for (index, value) in values.enumerated() { array[index] = makeMessage(value, messageLayout) }
        setRepeated(field, UnsafeMutableRawPointer(array), values.count)
    }

    /// Sets a map field: each entry becomes an entry message, whose key (field 1) and value
    /// (field 2) `encodeEntry` sets. Entries are written in the dictionary's order.
    public mutating func setMap<Key, Value>(
        _ number: Int32,
        _ map: [Key: Value],
        _ encodeEntry: (inout ProtoEncoder, Key, Value) -> Void
    ) {
        guard !map.isEmpty else { return }
        let field = layout.field(number, FieldShape(.message, repeated: true))
        let entryLayout = field.pointee.message!
        let array = allocate(map.count * 8, alignment: 8).assumingMemoryBound(to: UnsafeMutableRawPointer.self)
        for (index, (key, value)) in map.enumerated() {
            let entry = allocateMessage(entryLayout)
            var encoder = ProtoEncoder(base: entry, layout: entryLayout, arena: arena)
            encodeEntry(&encoder, key, value)
            array[index] = entry
        }
        setRepeated(field, UnsafeMutableRawPointer(array), map.count)
    }

    // MARK: Helpers

    @inline(__always)
    private func store<T: BitwiseCopyable>(_ value: T, _ number: Int32, _ storage: FieldStorage) {
        let field = layout.field(number, FieldShape(storage))
        (base + field.pointee.offset).storeBytes(of: value, as: T.self)
    }

    @inline(__always)
    private func storeOneof<T: BitwiseCopyable>(_ value: T, _ number: Int32, _ storage: FieldStorage) {
        let field = layout.field(number, FieldShape(storage, oneof: true))
        setCase(field)
        (base + field.pointee.offset).storeBytes(of: value, as: T.self)
    }

    @inline(__always)
    private func setCase(_ field: UnsafeMutablePointer<FieldLayout>) {
        // protobuf-c's `<oneof>_case` enum values are the member field numbers.
        (base + field.pointee.quantifierOffset).storeBytes(
            of: UInt32(bitPattern: field.pointee.number),
            as: UInt32.self
        )
    }

    private mutating func storeRepeated<T: BitwiseCopyable>(_ values: [T], _ number: Int32, _ storage: FieldStorage) {
        guard !values.isEmpty else { return }
        let array = allocateRepeated(values.count, number, storage)
        values.withUnsafeBytes { bytes in
            array.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        }
    }

    /// Allocates the C array of a repeated field and points the field at it.
    private func allocateRepeated(_ count: Int, _ number: Int32, _ storage: FieldStorage) -> UnsafeMutableRawPointer {
        let field = layout.field(number, FieldShape(storage, repeated: true))
        let array = allocate(count * storage.elementSize, alignment: 8)
        setRepeated(field, array, count)
        return array
    }

    @inline(__always)
    private func setRepeated(_ field: UnsafeMutablePointer<FieldLayout>, _ array: UnsafeMutableRawPointer, _ count: Int)
    {
        (base + field.pointee.quantifierOffset).storeBytes(of: count, as: Int.self)
        (base + field.pointee.offset).storeBytes(of: array, as: UnsafeMutableRawPointer.self)
    }

    @inline(__always)
    private func allocate(_ byteCount: Int, alignment: Int) -> UnsafeMutableRawPointer {
        guard let memory = arena.pointee.allocate(byteCount: byteCount, alignment: alignment) else {
            // The encoding arena has no limit: only malloc failing gets here.
            preconditionFailure("out of memory")
        }
        return memory
    }

    private func allocateMessage(_ layout: MessageLayout) -> UnsafeMutableRawPointer {
        let message = allocate(layout.size, alignment: 16)
        message.copyMemory(from: layout.initialValue, byteCount: layout.size)
        return message
    }

    private func makeMessage<M: ProtoMessage>(_ value: M, _ messageLayout: MessageLayout) -> UnsafeMutableRawPointer {
        precondition(
            messageLayout.storage == M.protoMessageLayout.layout.storage,
            "protobuf message field of another type"
        )
        let message = allocateMessage(messageLayout)
        var encoder = ProtoEncoder(base: message, layout: messageLayout, arena: arena)
        value.encode(to: &encoder)
        return message
    }

    /// Copies `value` as a NUL-terminated C string, or returns `nil` if it contains U+0000.
    private func copyCString(_ value: String) -> UnsafeMutableRawPointer? {
        let copied = value.utf8.withContiguousStorageIfAvailable { copyCString($0) }
        if let copied { return copied }
        var value = value
        return value.withUTF8 { copyCString($0) }
    }

    private func copyCString(_ utf8: UnsafeBufferPointer<UInt8>) -> UnsafeMutableRawPointer? {
        let count = utf8.count
        let string = allocate(count + 1, alignment: 1)
        if count > 0 {
            if memchr(utf8.baseAddress!, 0, count) != nil { return nil }
            string.copyMemory(from: utf8.baseAddress!, byteCount: count)
        }
        string.storeBytes(of: 0, toByteOffset: count, as: UInt8.self)
        return string
    }

    private func storeBinary(_ value: [UInt8], at field: UnsafeMutableRawPointer) {
        // ProtobufCBinaryData is { size_t len; uint8_t *data; }.
        let data = allocate(Swift.max(value.count, 1), alignment: 1)
        value.withUnsafeBytes { bytes in
            if bytes.count > 0 { data.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
        }
        field.storeBytes(of: value.count, as: Int.self)
        field.storeBytes(of: data, toByteOffset: 8, as: UnsafeMutableRawPointer.self)
    }

    private func appendUnknown(_ number: Int32, _ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            ProtobufC.appendUnknownField(
                to: base,
                number: number,
                kind: .lengthDelimited,
                bytes: UnsafeRawBufferPointer(utf8),
                arena: arena
            )
        }
    }

    private func appendUnknown<T: BitwiseCopyable>(_ number: Int32, _ kind: ProtobufC.UnknownFieldKind, _ value: T) {
        withUnsafeBytes(of: value) { bytes in
            ProtobufC.appendUnknownField(to: base, number: number, kind: kind, bytes: bytes, arena: arena)
        }
    }
}
