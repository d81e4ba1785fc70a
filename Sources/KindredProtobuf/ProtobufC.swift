// The one file that talks to libprotobuf-c. Everything else in this module sees protobuf-c
// messages as raw memory described by `MessageLayout`.

internal import CProtobufC

/// The protobuf-c message descriptors of one generated C library, indexed by full name.
///
/// `KindredProto` builds one from `ckindred_message_descriptors()` on first use and asks it for
/// each message type's layout.
public final class ProtoDescriptorTable: @unchecked Sendable {
    // Safety: built completely in `init`, read-only afterwards.
    private var layouts: [String: ProtoMessageLayout] = [:]
    private var byDescriptor: [UnsafeRawPointer: ProtoMessageLayout] = [:]

    /// - Parameters:
    ///   - unsafeMessageDescriptors: `count` pointers to `ProtobufCMessageDescriptor`s with static
    ///     storage duration (those emitted by protoc-c).
    public init(unsafeMessageDescriptors descriptors: UnsafePointer<UnsafeRawPointer?>?, count: Int) {
        Self.checkCLayout()
        var pending: [UnsafeRawPointer] = []
        for index in 0..<count {
            if let descriptor = descriptors?[index] { pending.append(descriptor) }
        }
        // Every message type reachable from a listed one gets a layout, listed or not.
        while let descriptor = pending.popLast() {
            if byDescriptor[descriptor] != nil { continue }
            let layout = Self.makeLayout(descriptor)
            byDescriptor[descriptor] = layout
            layouts[layout.name] = layout
            pending.append(contentsOf: Self.messageFieldDescriptors(descriptor))
        }
        for layout in byDescriptor.values {
            let fields = layout.layout.fields
            for index in fields.indices {
                if let descriptor = fields[index].messageDescriptor {
                    fields[index].message = byDescriptor[descriptor]!.layout
                }
            }
        }
        for layout in byDescriptor.values {
            layout.layout.storage.pointee.isRecursive = Self.reachesCycle(from: layout.layout)
        }
    }

    /// The layout of the message type with full name `name` (without a leading dot); traps when
    /// the C library has no such message, which means generated Swift and C code are out of step.
    public func layout(named name: String) -> ProtoMessageLayout {
        guard let layout = layouts[name] else {
            preconditionFailure("no protobuf-c descriptor for \(name): regenerate with proto/generate.sh")
        }
        return layout
    }

    /// Full names of every message type in the table, map entries included.
    public var messageNames: [String] { layouts.keys.sorted() }

    private static func checkCLayout() {
        // The encoder and decoder access these C types as raw memory.
        precondition(MemoryLayout<ProtobufCBinaryData>.size == 16)
        precondition(MemoryLayout<ProtobufCBinaryData>.offset(of: \.data) == 8)
        precondition(MemoryLayout<protobuf_c_boolean>.size == 4)
        precondition(MemoryLayout<ProtobufCMessage>.size == 24)
    }

    private static func messageFieldDescriptors(_ descriptor: UnsafeRawPointer) -> [UnsafeRawPointer] {
        let message = descriptor.assumingMemoryBound(to: ProtobufCMessageDescriptor.self).pointee
        return (0..<Int(message.n_fields)).compactMap { index in
            let field = message.fields[index]
            return field.type == PROTOBUF_C_TYPE_MESSAGE ? field.descriptor : nil
        }
    }

    private static func makeLayout(_ descriptor: UnsafeRawPointer) -> ProtoMessageLayout {
        let message = descriptor.assumingMemoryBound(to: ProtobufCMessageDescriptor.self)
        precondition(message.pointee.magic == PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC, "not a message descriptor")
        let size = Int(message.pointee.sizeof_message)
        let initialValue = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        initialValue.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        message.pointee.message_init(initialValue.assumingMemoryBound(to: ProtobufCMessage.self))
        var fields: [FieldLayout] = []
        for index in 0..<Int(message.pointee.n_fields) {
            let field = message.pointee.fields[index]
            precondition(
                field.label == PROTOBUF_C_LABEL_NONE || field.label == PROTOBUF_C_LABEL_REPEATED,
                "only proto3 fields are supported"
            )
            let isOneof = field.flags & UInt32(PROTOBUF_C_FIELD_FLAG_ONEOF.rawValue) != 0
            fields.append(
                FieldLayout(
                    number: Int32(bitPattern: field.id),
                    shape: FieldShape(
                        storage(of: field.type),
                        repeated: field.label == PROTOBUF_C_LABEL_REPEATED,
                        oneof: isOneof
                    ),
                    offset: Int(field.offset),
                    quantifierOffset: Int(field.quantifier_offset),
                    defaultString: field.type == PROTOBUF_C_TYPE_STRING ? field.default_value : nil,
                    messageDescriptor: field.type == PROTOBUF_C_TYPE_MESSAGE ? field.descriptor : nil,
                    message: nil
                )
            )
        }
        return ProtoMessageLayout(
            descriptor: descriptor,
            name: String(cString: message.pointee.name),
            size: size,
            initialValue: initialValue,
            fields: fields
        )
    }

    private static func storage(of type: ProtobufCType) -> FieldStorage {
        switch type {
        case PROTOBUF_C_TYPE_INT32, PROTOBUF_C_TYPE_SINT32, PROTOBUF_C_TYPE_SFIXED32: .int32
        case PROTOBUF_C_TYPE_INT64, PROTOBUF_C_TYPE_SINT64, PROTOBUF_C_TYPE_SFIXED64: .int64
        case PROTOBUF_C_TYPE_UINT32, PROTOBUF_C_TYPE_FIXED32: .uint32
        case PROTOBUF_C_TYPE_UINT64, PROTOBUF_C_TYPE_FIXED64: .uint64
        case PROTOBUF_C_TYPE_FLOAT: .float
        case PROTOBUF_C_TYPE_DOUBLE: .double
        case PROTOBUF_C_TYPE_BOOL: .bool
        case PROTOBUF_C_TYPE_ENUM: .enumeration
        case PROTOBUF_C_TYPE_STRING: .string
        case PROTOBUF_C_TYPE_BYTES: .bytes
        case PROTOBUF_C_TYPE_MESSAGE: .message
        default: preconditionFailure("unknown protobuf-c field type \(type.rawValue)")
        }
    }

    private static func reachesCycle(from start: MessageLayout) -> Bool {
        var visiting: Set<UnsafeMutableRawPointer> = []
        var done: Set<UnsafeMutableRawPointer> = []
        func visit(_ layout: MessageLayout) -> Bool {
            let id = UnsafeMutableRawPointer(layout.storage)
            if visiting.contains(id) { return true }
            if done.contains(id) { return false }
            visiting.insert(id)
            for field in layout.fields {
                if let next = field.message, visit(next) { return true }
            }
            visiting.remove(id)
            done.insert(id)
            return false
        }
        return visit(start)
    }
}

/// Pack and unpack through libprotobuf-c.
///
/// The entry points are not generic: `ProtoMessage`'s extension methods are called unspecialized
/// from other modules, where generic helpers would look up type metadata on every call.
enum ProtobufC {
    /// Largest message protobuf allows (2 GiB - 1).
    static let maximumMessageSize = Int(Int32.max)

    /// Stack memory for the C structs of one pack call; larger messages continue on the heap.
    private static let packStackSize = 1024
    /// Stack memory for one unpack call.
    private static let unpackStackSize = 2048

    /// Builds the C struct of a `layout` message with `encode` in an arena on the stack and
    /// passes it, and the arena, to `body`.
    static func withCMessage<R>(
        _ layout: MessageLayout,
        _ encode: (inout ProtoEncoder) -> Void,
        _ body: (UnsafePointer<ProtobufCMessage>, UnsafeMutablePointer<Arena>) throws(ProtoError) -> R
    ) throws(ProtoError) -> R {
        try withUnsafeTemporaryAllocation(byteCount: packStackSize, alignment: 16) { stack throws(ProtoError) in
            let arena = Arena.create(in: stack, limit: .max)
            defer { arena.deinitialize(count: 1) }
            guard let base = arena.pointee.allocate(byteCount: layout.size, alignment: 16) else {
                throw ProtoError(code: .tooLarge, messageName: layout.name)
            }
            base.copyMemory(from: layout.initialValue, byteCount: layout.size)
            var encoder = ProtoEncoder(base: base, layout: layout, arena: arena)
            encode(&encoder)
            return try body(UnsafeRawPointer(base).assumingMemoryBound(to: ProtobufCMessage.self), arena)
        }
    }

    static func serialize(_ layout: MessageLayout, _ encode: (inout ProtoEncoder) -> Void) throws(ProtoError) -> [UInt8]
    {
        try withCMessage(layout, encode) { message, _ throws(ProtoError) in
            let size = try packedSize(message, layout)
            guard size > 0 else { return [] }
            return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
                count = protobuf_c_message_pack(message, buffer.baseAddress!)
                precondition(count == size, "protobuf-c packed a different size than it computed")
            }
        }
    }

    static func serializedSize(_ layout: MessageLayout, _ encode: (inout ProtoEncoder) -> Void) throws(ProtoError)
        -> Int
    {
        try withCMessage(layout, encode) { message, _ throws(ProtoError) in try packedSize(message, layout) }
    }

    /// Packs into arena memory and passes the bytes to `body`.
    static func withSerializedBytes(
        _ layout: MessageLayout,
        _ encode: (inout ProtoEncoder) -> Void,
        _ body: (UnsafeRawBufferPointer) -> Void
    ) throws(ProtoError) {
        try withCMessage(layout, encode) { message, arena throws(ProtoError) in
            let size = try packedSize(message, layout)
            guard let buffer = arena.pointee.allocate(byteCount: Swift.max(size, 1), alignment: 16) else {
                throw ProtoError(code: .tooLarge, messageName: layout.name)
            }
            let count = size > 0 ? protobuf_c_message_pack(message, buffer.assumingMemoryBound(to: UInt8.self)) : 0
            precondition(count == size, "protobuf-c packed a different size than it computed")
            body(UnsafeRawBufferPointer(start: buffer, count: count))
        }
    }

    private static func packedSize(_ message: UnsafePointer<ProtobufCMessage>, _ layout: MessageLayout)
        throws(ProtoError) -> Int
    {
        let size = protobuf_c_message_get_packed_size(message)
        guard size <= maximumMessageSize else { throw ProtoError(code: .tooLarge, messageName: layout.name) }
        return size
    }

    /// Unpacks `bytes` as a `layout` message and passes the C struct to `decode`.
    static func deserialize(
        _ layout: MessageLayout,
        _ bytes: UnsafeRawBufferPointer,
        _ decode: (borrowing ProtoDecoder) throws(ProtoError) -> Void
    ) throws(ProtoError) {
        guard bytes.count <= maximumMessageSize else { throw ProtoError(code: .tooLarge, messageName: layout.name) }
        if layout.isRecursive {
            try WireScanner.checkNesting(bytes, layout: layout)
        }
        // The unpacked structs may be far larger than the input (an empty sub-message costs two
        // bytes on the wire and a whole struct in memory); bound them.
        let limit = 32 << 20 + 64 * bytes.count
        try withUnsafeTemporaryAllocation(byteCount: unpackStackSize, alignment: 16) { stack throws(ProtoError) in
            let arena = Arena.create(in: stack, limit: limit)
            defer { arena.deinitialize(count: 1) }
            var allocator = ProtobufCAllocator(
                alloc: { data, size in
                    data!.assumingMemoryBound(to: Arena.self).pointee.allocateRecordingSize(byteCount: size)
                },
                free: { _, _ in },  // The arena frees everything at once.
                allocator_data: UnsafeMutableRawPointer(arena)
            )
            // protobuf_c_message_unpack returns NULL on malformed input or a failed allocation.
            let data = bytes.baseAddress ?? UnsafeRawPointer(arena)
            guard
                let message = protobuf_c_message_unpack(
                    layout.descriptor.assumingMemoryBound(to: ProtobufCMessageDescriptor.self),
                    &allocator,
                    bytes.count,
                    data.assumingMemoryBound(to: UInt8.self)
                )
            else {
                let code: ProtoError.Code = arena.pointee.exceededLimit ? .tooLarge : .malformed
                throw ProtoError(code: code, messageName: layout.name)
            }
            try decode(ProtoDecoder(base: UnsafeRawPointer(message), layout: layout))
        }
    }

    /// How `appendUnknownField` writes a field.
    enum UnknownFieldKind {
        case lengthDelimited, fixed32, fixed64
    }

    /// Appends an unknown field to the message at `base`; protobuf-c packs unknown fields after the
    /// known ones. Used for values protobuf-c would pack wrongly: strings containing U+0000 (cut at
    /// the first NUL) and -0.0 (dropped as if it were the default, +0.0).
    static func appendUnknownField(
        to base: UnsafeMutableRawPointer,
        number: Int32,
        kind: UnknownFieldKind,
        bytes: UnsafeRawBufferPointer,
        arena: UnsafeMutablePointer<Arena>
    ) {
        let message = base.assumingMemoryBound(to: ProtobufCMessage.self)
        let count = Int(message.pointee.n_unknown_fields)
        let stride = MemoryLayout<ProtobufCMessageUnknownField>.stride
        // protobuf-c copies an unknown field's data after the tag verbatim, so for a
        // length-delimited field the data starts with the length varint.
        var prefix: [UInt8] = []
        var length = UInt64(bytes.count)
        while kind == .lengthDelimited {
            prefix.append(UInt8(truncatingIfNeeded: length & 0x7f) | (length > 0x7f ? 0x80 : 0))
            length >>= 7
            if length == 0 { break }
        }
        let wireType: ProtobufCWireType
        switch kind {
        case .lengthDelimited: wireType = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED
        case .fixed32: wireType = PROTOBUF_C_WIRE_TYPE_32BIT
        case .fixed64: wireType = PROTOBUF_C_WIRE_TYPE_64BIT
        }
        let dataCount = prefix.count + bytes.count
        guard let fields = arena.pointee.allocate(byteCount: (count + 1) * stride, alignment: 16),
            let data = arena.pointee.allocate(byteCount: Swift.max(dataCount, 1), alignment: 1)
        else { preconditionFailure("out of memory") }
        if count > 0 {
            fields.copyMemory(from: message.pointee.unknown_fields, byteCount: count * stride)
        }
        if !prefix.isEmpty { prefix.withUnsafeBytes { data.copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
        if bytes.count > 0 { (data + prefix.count).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
        (fields + count * stride).initializeMemory(
            as: ProtobufCMessageUnknownField.self,
            repeating: ProtobufCMessageUnknownField(
                tag: UInt32(bitPattern: number),
                wire_type: wireType,
                len: dataCount,
                data: data.assumingMemoryBound(to: UInt8.self)
            ),
            count: 1
        )
        message.pointee.unknown_fields = fields.assumingMemoryBound(to: ProtobufCMessageUnknownField.self)
        message.pointee.n_unknown_fields = UInt32(count + 1)
    }
}
