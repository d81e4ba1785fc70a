public import KindredProtobuf

/// The proto3 JSON mapping (https://protobuf.dev/programming-guides/json/) for every generated
/// message type, between JSON and the protobuf binary form, so that a JSON edge (Connect) can sit in
/// front of handlers that speak binary.
///
/// Output: lowerCamelCase names, fields at their default omitted (oneof members and `optional`
/// fields are written when set), 64-bit integers as strings, enums by name (numbers the enum does not
/// define as numbers), bytes as standard base64, "NaN"/"Infinity"/"-Infinity" for special floats.
/// Input: the JSON name or the proto name of each field; integers as numbers or strings (1e2 and
/// 100.0 are 100); enums by name or number; bytes in standard or URL-safe base64, padded or not;
/// `null` for a field's default. Refused with a `ProtoJSONError`: invalid JSON or UTF-8 (with the byte
/// offset), unknown fields, a field given twice, two members of a oneof, values that do not fit the
/// field, messages nested deeper than `ProtoDecodingLimits.maximumNesting`. The caller bounds the
/// input's size.
public enum ProtoJSON {
    /// The protobuf binary form of the JSON `json` of a `type` message.
    public static func binary(fromJSON json: some Collection<UInt8>, of type: any ProtoMessage.Type)
        throws(ProtoJSONError) -> [UInt8]
    {
        let schemas = SchemaSet.generated
        guard let index = schemas.index(of: type) else { throw unknownType(type) }
        let result: Result<[UInt8], ProtoJSONError>? = json.withContiguousStorageIfAvailable { buffer in
            convert(UnsafeRawBufferPointer(buffer), index, schemas)
        }
        return try (result ?? Array(json).withUnsafeBytes { convert($0, index, schemas) }).get()
    }

    /// The JSON form of the protobuf binary `bytes` of a `type` message. Unknown fields are dropped.
    public static func json(fromBinary bytes: some Collection<UInt8>, of type: any ProtoMessage.Type)
        throws(ProtoJSONError) -> [UInt8]
    {
        let schemas = SchemaSet.generated
        guard let index = schemas.index(of: type) else { throw unknownType(type) }
        let result: Result<[UInt8], ProtoJSONError>? = bytes.withContiguousStorageIfAvailable { buffer in
            convert(binary: UnsafeRawBufferPointer(buffer), index, schemas)
        }
        return try (result ?? Array(bytes).withUnsafeBytes { convert(binary: $0, index, schemas) }).get()
    }

    private static func convert(_ json: UnsafeRawBufferPointer, _ index: Int, _ schemas: SchemaSet) -> Result<
        [UInt8], ProtoJSONError
    > {
        var converter = JSONToBinary(schemas: schemas, json: json)
        defer { converter.deallocate() }
        do {
            try converter.document(index)
        } catch {
            return .failure(error)
        }
        return .success(converter.out.array)
    }

    private static func convert(binary: UnsafeRawBufferPointer, _ index: Int, _ schemas: SchemaSet) -> Result<
        [UInt8], ProtoJSONError
    > {
        guard binary.count < Int(Int32.max) else { return .failure(ProtoJSONError("the message is too large")) }
        var converter = BinaryToJSON(schemas: schemas, capacity: binary.count * 2 + 16)
        defer { converter.deallocate() }
        do {
            try converter.message(index, binary, 0..<binary.count, depth: 1)
        } catch {
            return .failure(error)
        }
        return .success(converter.out.array)
    }

    private static func unknownType(_ type: any ProtoMessage.Type) -> ProtoJSONError {
        ProtoJSONError("no descriptor for \(type.protoMessageName)")
    }
}
