/// A field's protobuf type, as `FieldDescriptorProto.Type` numbers it (groups are not supported).
enum FieldKind: UInt8 {
    case double = 1, float = 2, int64 = 3, uint64 = 4, int32 = 5, fixed64 = 6, fixed32 = 7, bool = 8
    case string = 9, message = 11, bytes = 12, uint32 = 13, enumeration = 14, sfixed32 = 15, sfixed64 = 16
    case sint32 = 17, sint64 = 18

    /// The wire type of one value of this kind.
    var wireType: UInt8 {
        switch self {
        case .double, .fixed64, .sfixed64: 1
        case .float, .fixed32, .sfixed32: 5
        case .string, .bytes, .message: 2
        case .int64, .uint64, .int32, .bool, .uint32, .enumeration, .sint32, .sint64: 0
        }
    }

    /// Whether a repeated field of this kind may be packed (every scalar but strings and bytes).
    var isPackable: Bool { wireType != 2 }

    /// Whether JSON carries the value as a string on output (the 64-bit integers).
    var isQuotedOnOutput: Bool {
        switch self {
        case .int64, .uint64, .fixed64, .sfixed64, .sint64: true
        default: false
        }
    }
}
