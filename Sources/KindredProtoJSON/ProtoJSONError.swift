/// A message could not be converted between JSON and the protobuf binary form.
///
/// `message` is written for the app developer who sent the JSON (the Connect edge answers it as
/// `INVALID_ARGUMENT`): it names the field, the message type and, for syntax errors, the byte
/// offset, but never echoes a value the caller sent, apart from a field name it did not recognise
/// (shortened).
public struct ProtoJSONError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, e.g. `unknown field "foo" in kindred.api.v1.SwipeRequest`.
    public let message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }

    /// Invalid JSON syntax or encoding at byte `offset` of the input.
    static func syntax(_ what: String, at offset: Int) -> ProtoJSONError {
        ProtoJSONError("invalid JSON at byte \(offset): \(what)")
    }

    /// A value that does not fit the field it was given for.
    static func value(_ what: String, field: FieldSchema, in message: MessageSchema, at offset: Int) -> ProtoJSONError {
        ProtoJSONError("invalid value for field \"\(field.jsonName.string)\" of \(message.name) at byte \(offset): \(what)")
    }

    /// Binary input that is not a valid encoding of the message type.
    static func malformedBinary(_ message: MessageSchema) -> ProtoJSONError {
        ProtoJSONError("the bytes are not a valid protobuf encoding of \(message.name)")
    }
}
