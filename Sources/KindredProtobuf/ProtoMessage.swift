/// A protobuf message as a Swift value: generated structs conform, and packing and unpacking go
/// through protobuf-c.
///
/// Generated code implements `encode(to:)` and `init(decoder:)` by field number; this module
/// turns them into protobuf-c structs and back, so generated code never touches a pointer.
public protocol ProtoMessage: Sendable, Hashable {
    /// Full protobuf name, e.g. `"kindred.testing.v1.EchoRequest"`.
    static var protoMessageName: String { get }
    /// The protobuf-c layout of the message; generated code looks it up once.
    static var protoMessageLayout: ProtoMessageLayout { get }
    /// A message with every field at its default.
    init()
    /// Writes every field that differs from its default into `encoder`.
    func encode(to encoder: inout ProtoEncoder)
    /// Reads every field from `decoder`.
    init(decoder: borrowing ProtoDecoder) throws(ProtoError)
}

extension ProtoMessage {
    /// The message in protobuf wire format.
    public func serializedBytes() throws(ProtoError) -> [UInt8] {
        try ProtobufC.withCMessage(self) { message, _ throws(ProtoError) in
            let size = try ProtobufC.packedSize(message)
            guard size > 0 else { return [] }
            return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
                count = ProtobufC.pack(message, into: buffer.baseAddress!)
                precondition(count == size, "protobuf-c packed a different size than it computed")
            }
        }
    }

    /// Packs the message into temporary memory and passes the bytes to `body`, which must not let
    /// them escape. Saves the array `serializedBytes()` allocates, e.g. when the caller copies the
    /// bytes into a network buffer anyway.
    public func withUnsafeSerializedBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        let result: Result<R, any Error> = try ProtobufC.withCMessage(self) { message, arena throws(ProtoError) in
            let size = try ProtobufC.packedSize(message)
            guard let buffer = arena.pointee.allocate(byteCount: Swift.max(size, 1), alignment: 16) else {
                throw ProtoError(code: .tooLarge, messageName: Self.protoMessageName)
            }
            let count = size > 0 ? ProtobufC.pack(message, into: buffer) : 0
            precondition(count == size, "protobuf-c packed a different size than it computed")
            return Result { try body(UnsafeRawBufferPointer(start: buffer, count: count)) }
        }
        return try result.get()
    }

    /// The number of bytes `serializedBytes()` returns.
    public var serializedSize: Int {
        (try? ProtobufC.withCMessage(self) { message, _ throws(ProtoError) in try ProtobufC.packedSize(message) })
            ?? Int.max
    }

    /// Decodes a message from protobuf wire format.
    ///
    /// Unknown fields are skipped. Throws on malformed input, strings that are not UTF-8, nesting
    /// deeper than `ProtoDecodingLimits.maximumNesting` and messages too large to unpack.
    public init(serializedBytes bytes: UnsafeRawBufferPointer) throws(ProtoError) {
        self = try ProtobufC.unpack(Self.self, from: bytes)
    }

    /// Decodes a message from protobuf wire format; see `init(serializedBytes:)`.
    public init(serializedBytes bytes: [UInt8]) throws(ProtoError) {
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(ProtoError) in try ProtobufC.unpack(Self.self, from: buffer) }
        }
        self = try result.get()
    }

    /// Decodes a message from protobuf wire format; see `init(serializedBytes:)`.
    public init(serializedBytes bytes: ArraySlice<UInt8>) throws(ProtoError) {
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(ProtoError) in try ProtobufC.unpack(Self.self, from: buffer) }
        }
        self = try result.get()
    }
}

/// A protobuf enum as a Swift enum. Proto3 enums are open: values the generated code does not
/// know decode to an `unrecognized(Int32)` case and encode back unchanged.
public protocol ProtoEnum: Sendable, Hashable, CaseIterable {
    /// The enum's first value, which is zero.
    init()
    init(rawValue: Int32)
    var rawValue: Int32 { get }
}

/// Boxed storage for a message field whose type contains the message itself, which a Swift struct
/// cannot store inline. Generated code hides it behind an optional property.
public final class ProtoBox<Value: ProtoMessage>: Sendable, Hashable {
    public let value: Value

    public init(_ value: Value) { self.value = value }

    public static func == (lhs: ProtoBox, rhs: ProtoBox) -> Bool { lhs === rhs || lhs.value == rhs.value }

    public func hash(into hasher: inout Hasher) { value.hash(into: &hasher) }
}

/// Limits the decoder enforces beyond what protobuf-c checks.
public enum ProtoDecodingLimits {
    /// Deepest nesting of messages accepted for message types that can contain themselves
    /// (protobuf's own default).
    public static let maximumNesting = 100
}
