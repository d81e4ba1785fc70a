/// The storage class of a field in a protobuf-c message struct.
///
/// Several protobuf types share one C representation (`int32`, `sint32` and `sfixed32` are all
/// `int32_t`), and the typed accessors of `ProtoEncoder`/`ProtoDecoder` check this class.
enum FieldStorage: UInt8 {
    case int32, int64, uint32, uint64, float, double, bool, enumeration, string, bytes, message

    /// Size of one element in a repeated field's C array.
    var elementSize: Int {
        switch self {
        case .int32, .uint32, .float, .bool, .enumeration: 4
        case .int64, .uint64, .double, .string, .message: 8
        case .bytes: 16
        }
    }
}

/// A field's storage class and whether it is repeated or a oneof member, in one byte so that
/// each typed accessor checks it with one comparison.
struct FieldShape: Equatable {
    var rawValue: UInt8

    private static let repeatedBit: UInt8 = 0x20
    private static let oneofBit: UInt8 = 0x40

    @inline(__always)
    init(_ storage: FieldStorage, repeated: Bool = false, oneof: Bool = false) {
        rawValue = storage.rawValue | (repeated ? Self.repeatedBit : 0) | (oneof ? Self.oneofBit : 0)
    }

    var storage: FieldStorage { FieldStorage(rawValue: rawValue & 0x1f)! }
    var isRepeated: Bool { rawValue & Self.repeatedBit != 0 }
    var isOneof: Bool { rawValue & Self.oneofBit != 0 }
    /// The shape a reader checks: reading a oneof member is reading a singular field.
    var ignoringOneof: FieldShape { FieldShape(rawValue: rawValue & ~Self.oneofBit) }

    private init(rawValue: UInt8) { self.rawValue = rawValue }
}

/// Where one field lives in a protobuf-c message struct.
struct FieldLayout {
    var number: Int32
    var shape: FieldShape
    var storage: FieldStorage { shape.storage }
    /// Offset of the value (or of the array pointer, for repeated fields).
    var offset: Int
    /// Offset of `n_<field>` for repeated fields and of `<oneof>_case` for oneof members.
    var quantifierOffset: Int
    /// protobuf-c's default for strings (`protobuf_c_empty_string`), compared by address.
    var defaultString: UnsafeRawPointer?
    /// The field's `ProtobufCMessageDescriptor`, for message fields.
    var messageDescriptor: UnsafeRawPointer?
    /// The layout of the field's message type.
    var message: MessageLayout?
}

/// The C layout of one message type: its protobuf-c descriptor, struct size, initial value and a
/// table from field number to field.
///
/// A pointer to memory that lives as long as the process, so that the encoder and decoder read it
/// without reference counting. Owned by a `ProtoMessageLayout`.
struct MessageLayout {
    struct Storage {
        /// `const ProtobufCMessageDescriptor *`.
        var descriptor: UnsafeRawPointer
        /// `sizeof` the C struct.
        var size: Int
        /// The struct as `message_init` leaves it; copied into every new struct.
        var initialValue: UnsafeRawPointer
        /// Fields sorted by number.
        var fields: UnsafeMutablePointer<FieldLayout>
        var fieldCount: Int
        /// `fieldIndex[number]` is an index into `fields`, or -1, for numbers below `denseCount`.
        var fieldIndex: UnsafeMutablePointer<Int16>
        var denseCount: Int
        /// True when a message of this type can contain itself, however indirectly: unpacking
        /// such a message first checks its nesting depth, since protobuf-c recurses without a limit.
        var isRecursive: Bool
        var owner: Unmanaged<ProtoMessageLayout>
    }

    let storage: UnsafeMutablePointer<Storage>

    static let denseLimit = 255

    var descriptor: UnsafeRawPointer { storage.pointee.descriptor }
    var size: Int { storage.pointee.size }
    var initialValue: UnsafeRawPointer { storage.pointee.initialValue }
    var isRecursive: Bool { storage.pointee.isRecursive }
    var fields: UnsafeMutableBufferPointer<FieldLayout> {
        .init(start: storage.pointee.fields, count: storage.pointee.fieldCount)
    }
    /// Full protobuf name, for error messages.
    var name: String { storage.pointee.owner.takeUnretainedValue().name }

    /// The field with `number` and `shape` for writing; traps when there is none, which means
    /// generated Swift code and generated C code come from different protos (run
    /// `proto/check-generated.sh`).
    @inline(__always)
    func field(_ number: Int32, _ shape: FieldShape) -> UnsafeMutablePointer<FieldLayout> {
        let field = lookup(number)
        precondition(field.pointee.shape == shape, "protobuf field differs from the C descriptor")
        return field
    }

    /// The field with `number` and `shape` (or the oneof member of that shape) for reading.
    @inline(__always)
    func fieldForReading(_ number: Int32, _ shape: FieldShape) -> UnsafeMutablePointer<FieldLayout> {
        let field = lookup(number)
        precondition(field.pointee.shape.ignoringOneof == shape, "protobuf field differs from the C descriptor")
        return field
    }

    @inline(__always)
    func lookup(_ number: Int32) -> UnsafeMutablePointer<FieldLayout> {
        if number >= 0 && Int(number) < storage.pointee.denseCount {
            let index = Int(storage.pointee.fieldIndex[Int(number)])
            precondition(index >= 0, "protobuf field number missing from the C descriptor")
            return storage.pointee.fields + index
        }
        guard let field = fieldIfPresent(number) else {
            preconditionFailure("protobuf field number missing from the C descriptor")
        }
        return field
    }

    /// The field with `number`, or `nil`; for the wire scanner, which meets unknown numbers.
    func fieldIfPresent(_ number: Int32) -> UnsafeMutablePointer<FieldLayout>? {
        let fields = self.fields
        var low = 0
        var high = fields.count
        while low < high {
            let middle = (low + high) / 2
            if fields[middle].number < number { low = middle + 1 } else { high = middle }
        }
        return low < fields.count && fields[low].number == number ? fields.baseAddress! + low : nil
    }
}

/// The protobuf-c layout of one message type, opaque outside this module.
///
/// Generated code holds one per message type in a `static let` (see
/// `ProtoMessage.protoMessageLayout`). Layouts are built once by `ProtoDescriptorTable` and live
/// for the whole process.
public final class ProtoMessageLayout: @unchecked Sendable {
    // Safety: the storage is written only while the owning `ProtoDescriptorTable` is being built,
    // before the layout is published; afterwards it is read-only.

    let name: String
    let layout: MessageLayout

    init(descriptor: UnsafeRawPointer, name: String, size: Int, initialValue: UnsafeRawPointer, fields: [FieldLayout]) {
        self.name = name
        let sorted = fields.sorted { $0.number < $1.number }
        let fieldStorage = UnsafeMutablePointer<FieldLayout>.allocate(capacity: Swift.max(sorted.count, 1))
        fieldStorage.initialize(from: sorted, count: sorted.count)
        let denseCount = Swift.min(Int(sorted.last?.number ?? 0), MessageLayout.denseLimit) + 1
        let fieldIndex = UnsafeMutablePointer<Int16>.allocate(capacity: denseCount)
        fieldIndex.initialize(repeating: -1, count: denseCount)
        for (index, field) in sorted.enumerated() where field.number <= MessageLayout.denseLimit {
            fieldIndex[Int(field.number)] = Int16(index)
        }
        let storage = UnsafeMutablePointer<MessageLayout.Storage>.allocate(capacity: 1)
        self.layout = MessageLayout(storage: storage)
        storage.initialize(
            to: MessageLayout.Storage(
                descriptor: descriptor,
                size: size,
                initialValue: initialValue,
                fields: fieldStorage,
                fieldCount: sorted.count,
                fieldIndex: fieldIndex,
                denseCount: denseCount,
                isRecursive: false,
                owner: .passUnretained(self)
            )
        )
    }

    deinit {
        layout.storage.pointee.initialValue.deallocate()
        layout.storage.pointee.fields.deallocate()
        layout.storage.pointee.fieldIndex.deallocate()
        layout.storage.deallocate()
    }
}
