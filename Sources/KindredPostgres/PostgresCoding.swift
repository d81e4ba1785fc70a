/// A Swift type that can be bound as a statement parameter.
public protocol PostgresEncodable: Sendable {
    /// The type the parameter is declared as (``PostgresDataType/unspecified`` lets the server infer it).
    static var postgresDataType: PostgresDataType { get }
    /// The format `encode(into:)` writes; binary unless stated otherwise.
    static var postgresFormat: PostgresFormat { get }
    /// Appends the value's bytes. A thrown error must not quote the value.
    func encode(into buffer: inout [UInt8]) throws
}

extension PostgresEncodable {
    public static var postgresFormat: PostgresFormat { .binary }
}

/// A Swift type that a result column can be decoded as. Results always arrive in binary format.
public protocol PostgresDecodable: Sendable {
    /// Decodes a non-NULL value of the column's `type` from its binary representation.
    init(postgresBytes bytes: UnsafeRawBufferPointer, type: PostgresDataType) throws
    /// The value for SQL NULL; the default throws (Optional returns nil).
    static func postgresNull() throws -> Self
}

extension PostgresDecodable {
    public static func postgresNull() throws -> Self {
        throw PostgresError.decoding("the value is NULL; decode an Optional")
    }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public init(postgresBytes bytes: UnsafeRawBufferPointer, type: PostgresDataType) throws {
        self = .some(try Wrapped(postgresBytes: bytes, type: type))
    }

    public static func postgresNull() throws -> Wrapped? { nil }
}

// MARK: Integers

extension Int64: PostgresEncodable, PostgresDecodable {
    public static var postgresDataType: PostgresDataType { .int8 }

    public func encode(into buffer: inout [UInt8]) {
        buffer.appendBigEndian(self)
    }

    /// Decodes int8, int4, int2 and oid columns.
    public init(postgresBytes bytes: UnsafeRawBufferPointer, type: PostgresDataType) throws {
        switch (type, bytes.count) {
        case (.int8, 8): self = bytes.loadBigEndian(Int64.self)
        case (.int4, 4): self = Int64(bytes.loadBigEndian(Int32.self))
        case (.int2, 2): self = Int64(bytes.loadBigEndian(Int16.self))
        case (.oid, 4): self = Int64(bytes.loadBigEndian(UInt32.self))
        default: throw PostgresError.typeMismatch(Self.self, type)
        }
    }
}

extension Int: PostgresEncodable, PostgresDecodable {
    public static var postgresDataType: PostgresDataType { .int8 }

    public func encode(into buffer: inout [UInt8]) {
        buffer.appendBigEndian(Int64(self))
    }

    public init(postgresBytes bytes: UnsafeRawBufferPointer, type: PostgresDataType) throws {
        self = Int(try Int64(postgresBytes: bytes, type: type))
    }
}

extension Int32: PostgresEncodable, PostgresDecodable {
    public static var postgresDataType: PostgresDataType { .int4 }

    public func encode(into buffer: inout [UInt8]) {
        buffer.appendBigEndian(self)
    }

    public init(postgresBytes bytes: UnsafeRawBufferPointer, type: PostgresDataType) throws {
        guard let value = Int32(exactly: try Int64(postgresBytes: bytes, type: type)) else {
            throw PostgresError.decoding("the \(type) value does not fit in Int32")
        }
        self = value
    }
}

extension Int16: PostgresEncodable, PostgresDecodable {
    public static var postgresDataType: PostgresDataType { .int2 }

    public func encode(into buffer: inout [UInt8]) {
        buffer.appendBigEndian(self)
    }

    public init(postgresBytes bytes: UnsafeRawBufferPointer, type: PostgresDataType) throws {
        guard let value = Int16(exactly: try Int64(postgresBytes: bytes, type: type)) else {
            throw PostgresError.decoding("the \(type) value does not fit in Int16")
        }
        self = value
    }
}

// MARK: Bool, Double

extension Bool: PostgresEncodable, PostgresDecodable {
    public static var postgresDataType: PostgresDataType { .bool }

    public func encode(into buffer: inout [UInt8]) {
        buffer.append(self ? 1 : 0)
    }

    public init(postgresBytes bytes: UnsafeRawBufferPointer, type: PostgresDataType) throws {
        guard type == .bool, bytes.count == 1 else { throw PostgresError.typeMismatch(Self.self, type) }
        self = bytes[0] != 0
    }
}

extension Double: PostgresEncodable, PostgresDecodable {
    public static var postgresDataType: PostgresDataType { .float8 }

    public func encode(into buffer: inout [UInt8]) {
        buffer.appendBigEndian(self.bitPattern)
    }

    /// Decodes float8 and float4 columns (cast numeric to float8 in SQL).
    public init(postgresBytes bytes: UnsafeRawBufferPointer, type: PostgresDataType) throws {
        switch (type, bytes.count) {
        case (.float8, 8): self = Double(bitPattern: bytes.loadBigEndian(UInt64.self))
        case (.float4, 4): self = Double(Float(bitPattern: bytes.loadBigEndian(UInt32.self)))
        default: throw PostgresError.typeMismatch(Self.self, type)
        }
    }
}

// MARK: String

extension String: PostgresEncodable, PostgresDecodable {
    /// Unspecified, like a quoted literal: the server types the parameter from its use, so a string
    /// can be compared with or inserted into text, uuid, enum, jsonb, … columns without a cast.
    public static var postgresDataType: PostgresDataType { .unspecified }
    public static var postgresFormat: PostgresFormat { .text }

    public func encode(into buffer: inout [UInt8]) {
        buffer.append(contentsOf: self.utf8)
    }

    /// Decodes text-like columns (text, varchar, char(n), name, json, jsonb, xml), uuid (lower-case
    /// with dashes) and user-defined types whose binary form is their text (enums, citext).
    public init(postgresBytes bytes: UnsafeRawBufferPointer, type: PostgresDataType) throws {
        switch type {
        case .text, .varchar, .bpchar, .name, .json, .xml, .unknown, .char:
            self = String(decoding: bytes, as: UTF8.self)
        case .jsonb:
            // Binary jsonb is a version byte (1) followed by the JSON text.
            guard bytes.first == 1 else { throw PostgresError.decoding("unknown jsonb version") }
            self = String(decoding: UnsafeRawBufferPointer(rebasing: bytes.dropFirst()), as: UTF8.self)
        case .uuid:
            guard bytes.count == 16 else { throw PostgresError.decoding("a uuid must have 16 bytes") }
            self = formatUUID(bytes)
        case _ where type.isUserDefined:
            self = String(decoding: bytes, as: UTF8.self)
        default:
            throw PostgresError.typeMismatch(Self.self, type)
        }
    }
}

private func formatUUID(_ bytes: UnsafeRawBufferPointer) -> String {
    let hex = Array("0123456789abcdef".utf8)
    var text: [UInt8] = []
    text.reserveCapacity(36)
    for (index, byte) in bytes.enumerated() {
        if index == 4 || index == 6 || index == 8 || index == 10 { text.append(UInt8(ascii: "-")) }
        text.append(hex[Int(byte >> 4)])
        text.append(hex[Int(byte & 0x0f)])
    }
    return String(decoding: text, as: UTF8.self)
}

// MARK: Arrays and bytea

/// An element of a Swift array bound as, or decoded from, a PostgreSQL array. `UInt8` is the
/// exception: `[UInt8]` is `bytea`.
public protocol PostgresArrayElement: Sendable {
    /// The array type, e.g. ``PostgresDataType/int8Array``.
    static var postgresArrayDataType: PostgresDataType { get }
    static func encodeArray(_ elements: [Self], into buffer: inout [UInt8]) throws
    static func decodeArray(_ bytes: UnsafeRawBufferPointer, type: PostgresDataType) throws -> [Self]
}

extension Array: PostgresEncodable where Element: PostgresArrayElement {
    public static var postgresDataType: PostgresDataType { Element.postgresArrayDataType }

    public func encode(into buffer: inout [UInt8]) throws {
        try Element.encodeArray(self, into: &buffer)
    }
}

extension Array: PostgresDecodable where Element: PostgresArrayElement {
    public init(postgresBytes bytes: UnsafeRawBufferPointer, type: PostgresDataType) throws {
        self = try Element.decodeArray(bytes, type: type)
    }
}

extension UInt8: PostgresArrayElement {
    public static var postgresArrayDataType: PostgresDataType { .bytea }

    public static func encodeArray(_ elements: [UInt8], into buffer: inout [UInt8]) {
        buffer.append(contentsOf: elements)
    }

    public static func decodeArray(_ bytes: UnsafeRawBufferPointer, type: PostgresDataType) throws -> [UInt8] {
        guard type == .bytea else { throw PostgresError.typeMismatch([UInt8].self, type) }
        return Array(bytes)
    }
}

/// Elements sent in PostgreSQL's binary array format (one dimension, lower bound 1, no NULLs).
public protocol PostgresBinaryArrayElement: PostgresArrayElement, PostgresEncodable, PostgresDecodable {
    /// The element type written into the array header (defaults to `postgresDataType`).
    static var postgresArrayElementDataType: PostgresDataType { get }
}

extension PostgresBinaryArrayElement {
    public static var postgresArrayElementDataType: PostgresDataType { Self.postgresDataType }

    public static func encodeArray(_ elements: [Self], into buffer: inout [UInt8]) throws {
        // Header: dimensions, has-NULLs flag, element OID; per dimension: length, lower bound.
        buffer.appendBigEndian(Int32(elements.isEmpty ? 0 : 1))
        buffer.appendBigEndian(Int32(0))
        buffer.appendBigEndian(Self.postgresArrayElementDataType.rawValue)
        if !elements.isEmpty {
            buffer.appendBigEndian(Int32(elements.count))
            buffer.appendBigEndian(Int32(1))
        }
        for element in elements {
            let lengthOffset = buffer.count
            buffer.appendBigEndian(Int32(0))
            try element.encode(into: &buffer)
            let length = Int32(buffer.count - lengthOffset - 4)
            withUnsafeBytes(of: length.bigEndian) { buffer.replaceSubrange(lengthOffset..<lengthOffset + 4, with: $0) }
        }
    }

    public static func decodeArray(_ bytes: UnsafeRawBufferPointer, type: PostgresDataType) throws -> [Self] {
        var reader = BinaryReader(bytes)
        let dimensions = try reader.read(Int32.self)
        _ = try reader.read(Int32.self)  // has-NULLs flag; a NULL element is rejected below
        let elementType = PostgresDataType(rawValue: try reader.read(UInt32.self))
        if dimensions == 0 { return [] }
        guard dimensions == 1 else { throw PostgresError.decoding("only one-dimensional arrays are supported") }
        let count = try reader.read(Int32.self)
        _ = try reader.read(Int32.self)  // lower bound
        guard count >= 0 else { throw PostgresError.decoding("malformed array") }
        var elements: [Self] = []
        elements.reserveCapacity(Int(count))
        for _ in 0..<count {
            let length = try reader.read(Int32.self)
            guard length >= 0 else { throw PostgresError.decoding("the array has a NULL element") }
            elements.append(try Self(postgresBytes: try reader.read(bytes: Int(length)), type: elementType))
        }
        return elements
    }
}

extension Int64: PostgresBinaryArrayElement {
    public static var postgresArrayDataType: PostgresDataType { .int8Array }
}

extension Int: PostgresBinaryArrayElement {
    public static var postgresArrayDataType: PostgresDataType { .int8Array }
}

extension Int32: PostgresBinaryArrayElement {
    public static var postgresArrayDataType: PostgresDataType { .int4Array }
}

extension Bool: PostgresBinaryArrayElement {
    public static var postgresArrayDataType: PostgresDataType { .boolArray }
}

extension Double: PostgresBinaryArrayElement {
    public static var postgresArrayDataType: PostgresDataType { .float8Array }
}

extension String: PostgresBinaryArrayElement {
    public static var postgresArrayDataType: PostgresDataType { .textArray }
    public static var postgresArrayElementDataType: PostgresDataType { .text }
}

// MARK: Helpers

extension PostgresError {
    static func typeMismatch(_ swiftType: Any.Type, _ type: PostgresDataType) -> PostgresError {
        .decoding("a \(type) value cannot be decoded as \(swiftType); cast it in SQL")
    }
}

extension [UInt8] {
    @inline(__always)
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.bigEndian) { self.append(contentsOf: $0) }
    }
}

extension UnsafeRawBufferPointer {
    @inline(__always)
    func loadBigEndian<T: FixedWidthInteger>(_: T.Type) -> T {
        T(bigEndian: self.loadUnaligned(as: T.self))
    }
}

/// Reads big-endian fields from a binary value, throwing on truncation.
struct BinaryReader {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    mutating func read<T: FixedWidthInteger>(_: T.Type) throws -> T {
        try self.read(bytes: MemoryLayout<T>.size).loadBigEndian(T.self)
    }

    mutating func read(bytes count: Int) throws -> UnsafeRawBufferPointer {
        guard count >= 0, self.bytes.count - self.offset >= count else {
            throw PostgresError.decoding("truncated binary value")
        }
        defer { self.offset += count }
        return UnsafeRawBufferPointer(rebasing: self.bytes[self.offset..<self.offset + count])
    }
}
