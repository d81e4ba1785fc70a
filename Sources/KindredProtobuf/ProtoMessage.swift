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
    /// A message built by `populate`: `EchoRequest.with { $0.message = "hi" }`.
    @inlinable
    public static func with(_ populate: (inout Self) throws -> Void) rethrows -> Self {
        var message = Self()
        try populate(&message)
        return message
    }

    /// The message in protobuf wire format.
    public func serializedBytes() throws(ProtoError) -> [UInt8] {
        try ProtobufC.serialize(Self.protoMessageLayout.layout) { encoder in self.encode(to: &encoder) }
    }

    /// Packs the message into temporary memory and passes the bytes to `body`, which must not let
    /// them escape. Saves the array `serializedBytes()` allocates, e.g. when the caller copies the
    /// bytes into a network buffer anyway.
    @inlinable
    public func withUnsafeSerializedBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        // Inlinable so that `R` is concrete in the caller: unspecialized, `R?` would cost a metadata
        // lookup per call.
        var result: R?
        var bodyError: (any Error)?
        try protoWithSerializedBytes(Self.protoMessageLayout, { encoder in self.encode(to: &encoder) }) { bytes in
            do {
                result = try body(bytes)
            } catch {
                bodyError = error
            }
        }
        if let bodyError { throw bodyError }
        return result!
    }

    /// The number of bytes `serializedBytes()` returns (`Int.max` past protobuf's 2 GiB limit).
    public var serializedSize: Int {
        (try? ProtobufC.serializedSize(Self.protoMessageLayout.layout) { encoder in self.encode(to: &encoder) })
            ?? Int.max
    }

    /// Decodes a message from protobuf wire format.
    ///
    /// Unknown fields are skipped. Throws on malformed input, strings that are not UTF-8, nesting
    /// deeper than `ProtoDecodingLimits.maximumNesting` and messages too large to unpack.
    public init(serializedBytes bytes: UnsafeRawBufferPointer) throws(ProtoError) {
        self.init()
        try ProtobufC.deserialize(Self.protoMessageLayout.layout, bytes) { decoder throws(ProtoError) in
            self = try Self(decoder: decoder)
        }
    }

    /// Decodes a message from protobuf wire format; see `init(serializedBytes:)`.
    public init(serializedBytes bytes: [UInt8]) throws(ProtoError) {
        self.init()
        // withUnsafeBytes rethrows untyped errors; carry the typed one out.
        var failure: ProtoError?
        bytes.withUnsafeBytes { buffer in
            do throws(ProtoError) {
                try ProtobufC.deserialize(Self.protoMessageLayout.layout, buffer) { decoder throws(ProtoError) in
                    self = try Self(decoder: decoder)
                }
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    /// Decodes a message from protobuf wire format; see `init(serializedBytes:)`.
    public init(serializedBytes bytes: ArraySlice<UInt8>) throws(ProtoError) {
        self.init()
        // withUnsafeBytes rethrows untyped errors; carry the typed one out.
        var failure: ProtoError?
        bytes.withUnsafeBytes { buffer in
            do throws(ProtoError) {
                try ProtobufC.deserialize(Self.protoMessageLayout.layout, buffer) { decoder throws(ProtoError) in
                    self = try Self(decoder: decoder)
                }
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }
}

/// The non-generic part of `withUnsafeSerializedBytes`.
@usableFromInline
func protoWithSerializedBytes(
    _ layout: ProtoMessageLayout,
    _ encode: (inout ProtoEncoder) -> Void,
    _ body: (UnsafeRawBufferPointer) -> Void
) throws(ProtoError) {
    try ProtobufC.withSerializedBytes(layout.layout, encode, body)
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
