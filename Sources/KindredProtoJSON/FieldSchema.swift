/// One field of a message type, as the JSON mapping needs it: plain values only, so that the
/// converters copy it without reference counting.
struct FieldSchema {
    var number: Int32
    var kind: FieldKind
    var isRepeated: Bool
    /// Repeated scalars written as one length-delimited block (proto3's default).
    var isPacked: Bool
    /// A `map<K, V>` field: `message` is its entry type (key = field 1, value = field 2).
    var isMap: Bool
    /// Emitted whenever set, even at its default: a oneof member, a proto3 `optional` field or a message.
    var hasPresence: Bool
    /// Index into `MessageSchema.oneofNames` of the real (not synthetic) oneof it belongs to, or -1.
    var oneof: Int16
    /// Index into `SchemaSet.messages` for message and map fields, else -1.
    var message: Int32
    /// Index into `SchemaSet.enums` for enum fields, else -1.
    var enumeration: Int32
    /// The name in the .proto file, e.g. `page_token`.
    var protoName: SchemaName
    /// The lowerCamelCase name JSON uses, e.g. `pageToken`.
    var jsonName: SchemaName
    /// `"pageToken":`, as written on output.
    var jsonKey: SchemaName
}
