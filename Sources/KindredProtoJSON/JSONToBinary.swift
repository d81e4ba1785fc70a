import KindredProtobuf

/// Proto3 JSON → protobuf binary, driven by `SchemaSet`: reads the JSON a token at a time as the
/// schema expects and writes each field as it is read (fields in the JSON's order; the binary form
/// allows any order). Unknown fields, duplicate fields, two members of one oneof and values that do
/// not fit their field are refused.
struct JSONToBinary {
    private let schemas: SchemaSet
    private var scanner: JSONScanner
    var out: OutputBuffer
    /// Decoded strings (keys, enum names, base64, quoted numbers) before they are interpreted.
    private var scratch = OutputBuffer(capacity: 64)

    init(schemas: SchemaSet, json: UnsafeRawBufferPointer) {
        self.schemas = schemas
        self.scanner = JSONScanner(json)
        out = OutputBuffer(capacity: json.count)
    }

    /// Frees the buffers (after the output is copied out).
    func deallocate() {
        out.deallocate()
        scratch.deallocate()
    }

    mutating func document(_ index: Int) throws(ProtoJSONError) {
        try message(index, depth: 1)
        try scanner.expectEnd()
    }

    private mutating func message(_ index: Int, depth: Int) throws(ProtoJSONError) {
        let schema = schemas.messages[index]
        guard depth <= ProtoDecodingLimits.maximumNesting else {
            throw ProtoJSONError("messages nested more than \(ProtoDecodingLimits.maximumNesting) deep in \(schema.name)")
        }
        let fields = schema.fields
        guard scanner.consume(UInt8(ascii: "{")) else { throw scanner.unexpected("an object for \(schema.name)") }
        if scanner.consume(UInt8(ascii: "}")) { return }
        var seen = FieldSet(count: fields.count)
        var oneofsSet: UInt64 = 0
        repeat {
            let keyOffset = scanner.position
            guard scanner.atString() else { throw scanner.unexpected("a field name") }
            scratch.removeAll()
            try scanner.readString(into: &scratch)
            let found = schema.index(ofName: scratch.bytes)
            guard let fieldIndex = found else {
                throw ProtoJSONError("unknown field \(Self.quotedForError(scratch.array)) in \(schema.name)")
            }
            let field = fields[fieldIndex]
            guard seen.insert(fieldIndex) else {
                throw ProtoJSONError("field \"\(field.jsonName.string)\" of \(schema.name) occurs more than once (at byte \(keyOffset))")
            }
            try scanner.expect(UInt8(ascii: ":"), "':'")
            if try scanner.consumeNull() { continue }  // null is the field's default: nothing to write.
            if field.oneof >= 0 {
                let bit: UInt64 = 1 << UInt64(field.oneof & 63)
                guard oneofsSet & bit == 0 else {
                    throw ProtoJSONError(
                        "more than one field of oneof \"\(schema.oneofNames[Int(field.oneof)].string)\" in \(schema.name) (at byte \(keyOffset))"
                    )
                }
                oneofsSet |= bit
            }
            if field.isMap {
                try map(field, schema, depth: depth)
            } else if field.isRepeated {
                try repeated(field, schema, depth: depth)
            } else {
                let mark = out.count
                let isSet = try value(field, schema, depth: depth, tagged: true)
                if !isSet && !field.hasPresence {
                    out.truncate(to: mark)  // implicit presence: the default is not written
                }
            }
        } while scanner.consume(UInt8(ascii: ","))
        guard scanner.consume(UInt8(ascii: "}")) else { throw scanner.unexpected("',' or '}'") }
    }

    private mutating func repeated(_ field: FieldSchema, _ schema: MessageSchema, depth: Int) throws(ProtoJSONError) {
        guard scanner.consume(UInt8(ascii: "[")) else {
            throw .value("expected an array", field: field, in: schema, at: scanner.position)
        }
        if scanner.consume(UInt8(ascii: "]")) { return }
        let packedLength: Int?
        if field.isPacked {
            out.appendTag(field.number, 2)
            packedLength = out.beginLength()
        } else {
            packedLength = nil
        }
        repeat {
            if try scanner.consumeNull() {
                throw .value("null is not allowed in an array", field: field, in: schema, at: scanner.position - 4)
            }
            _ = try value(field, schema, depth: depth, tagged: packedLength == nil)
        } while scanner.consume(UInt8(ascii: ","))
        guard scanner.consume(UInt8(ascii: "]")) else { throw scanner.unexpected("',' or ']'") }
        if let packedLength { out.endLength(at: packedLength) }
    }

    private mutating func map(_ field: FieldSchema, _ schema: MessageSchema, depth: Int) throws(ProtoJSONError) {
        let entrySchema = schemas.messages[Int(field.message)]
        let keyField = entrySchema.fields[0]
        let valueField = entrySchema.fields[1]
        guard scanner.consume(UInt8(ascii: "{")) else {
            throw .value("expected an object", field: field, in: schema, at: scanner.position)
        }
        if scanner.consume(UInt8(ascii: "}")) { return }
        repeat {
            guard scanner.atString() else { throw scanner.unexpected("a map key") }
            out.appendTag(field.number, 2)
            let entryLength = out.beginLength()
            let keyOffset = scanner.position
            if keyField.kind == .string {
                out.appendTag(1, 2)
                let keyLength = out.beginLength()
                try scanner.readString(into: &out)
                out.endLength(at: keyLength)
            } else {
                scratch.removeAll()
                try scanner.readString(into: &scratch)
                try mapKey(keyField, field, schema, at: keyOffset)
            }
            try scanner.expect(UInt8(ascii: ":"), "':'")
            if try scanner.consumeNull() {
                throw .value("null is not allowed as a map value", field: field, in: schema, at: scanner.position - 4)
            }
            _ = try value(valueField, entrySchema, depth: depth, tagged: true, context: (field, schema))
            out.endLength(at: entryLength)
        } while scanner.consume(UInt8(ascii: ","))
        guard scanner.consume(UInt8(ascii: "}")) else { throw scanner.unexpected("',' or '}'") }
    }

    /// Writes the non-string map key in `scratch` as field 1 of the entry.
    private mutating func mapKey(_ keyField: FieldSchema, _ field: FieldSchema, _ schema: MessageSchema, at offset: Int)
        throws(ProtoJSONError)
    {
        if keyField.kind == .bool {
            let isTrue = scratch.elementsEqual("true")
            guard isTrue || scratch.elementsEqual("false") else {
                throw .value("a bool map key is \"true\" or \"false\"", field: field, in: schema, at: offset)
            }
            out.appendTag(1, 0)
            out.append(isTrue ? 1 : 0)
            return
        }
        guard let integer = scratchInteger() else {
            throw .value("a map key of this field is an integer", field: field, in: schema, at: offset)
        }
        out.appendTag(1, keyField.kind.wireType)
        try writeInteger(integer, keyField, context: (field, schema), at: offset)
    }

    /// Reads one value of `field` and writes it (after its tag when `tagged`); returns false when it
    /// is the default of a field with implicit presence (the caller then removes it).
    ///
    /// `context` names the field and message for errors when `field` is a map entry's value.
    private mutating func value(
        _ field: FieldSchema,
        _ schema: MessageSchema,
        depth: Int,
        tagged: Bool,
        context: (FieldSchema, MessageSchema)? = nil
    ) throws(ProtoJSONError) -> Bool {
        let (errorField, errorSchema) = context ?? (field, schema)
        let offset: Int = {
            var copy = scanner
            _ = copy.peek()
            return copy.position
        }()
        func invalid(_ what: String) -> ProtoJSONError { .value(what, field: errorField, in: errorSchema, at: offset) }
        if tagged { out.appendTag(field.number, field.kind.wireType) }
        switch field.kind {
        case .message:
            let length = out.beginLength()
            try message(Int(field.message), depth: depth + 1)
            out.endLength(at: length)
            return true
        case .string:
            guard scanner.atString() else { throw invalid("expected a string") }
            let length = out.beginLength()
            try scanner.readString(into: &out)
            let empty = out.count == length + 1
            out.endLength(at: length)
            return !empty
        case .bytes:
            guard scanner.atString() else { throw invalid("expected a base64 string") }
            scratch.removeAll()
            try scanner.readString(into: &scratch)
            let length = out.beginLength()
            let decoded = JSONBase64.decode(scratch.bytes, into: &out)
            guard decoded else { throw invalid("not base64") }
            let empty = out.count == length + 1
            out.endLength(at: length)
            return !empty
        case .bool:
            guard let value = try scanner.consumeBool() else { throw invalid("expected true or false") }
            out.append(value ? 1 : 0)
            return value
        case .enumeration:
            if scanner.atString() {
                scratch.removeAll()
                try scanner.readString(into: &scratch)
                let enumeration = schemas.enums[Int(field.enumeration)]
                guard let number = enumeration.number(ofName: scratch.bytes) else {
                    throw invalid("not a value of \(enumeration.name)")
                }
                out.appendVarint(UInt64(bitPattern: Int64(number)))
                return number != 0
            }
            guard scanner.atNumber() else { throw invalid("expected an enum value name or number") }
            return try integer(field, errorField, errorSchema, at: offset)
        case .float, .double:
            return try floatingPoint(field, invalid)
        default:
            return try integer(field, errorField, errorSchema, at: offset)
        }
    }

    /// An integer field's value: a number or a string holding one.
    private mutating func integer(_ field: FieldSchema, _ errorField: FieldSchema, _ errorSchema: MessageSchema, at offset: Int)
        throws(ProtoJSONError) -> Bool
    {
        let result: JSONNumber.IntegerResult
        if scanner.atString() {
            scratch.removeAll()
            try scanner.readString(into: &scratch)
            guard let integer = scratchInteger() else {
                throw .value("expected an integer", field: errorField, in: errorSchema, at: offset)
            }
            result = integer
        } else if scanner.atNumber() {
            let range = try scanner.readNumber()
            result = JSONNumber.integer(UnsafeRawBufferPointer(rebasing: scanner.bytes[range]))
        } else {
            throw .value("expected an integer", field: errorField, in: errorSchema, at: offset)
        }
        return try writeInteger(result, field, context: (errorField, errorSchema), at: offset)
    }

    /// Writes an integer of `field`'s kind; returns whether it is nonzero.
    @discardableResult
    private mutating func writeInteger(
        _ result: JSONNumber.IntegerResult,
        _ field: FieldSchema,
        context: (FieldSchema, MessageSchema),
        at offset: Int
    ) throws(ProtoJSONError) -> Bool {
        guard case .value(let negative, let magnitude) = result else {
            let what = if case .notInteger = result { "not an integer" } else { "out of range" }
            throw .value(what, field: context.0, in: context.1, at: offset)
        }
        let signedRange: (min: UInt64, max: UInt64)
        switch field.kind {
        case .int32, .sint32, .sfixed32, .enumeration: signedRange = (1 << 31, 1 << 31 - 1)
        case .int64, .sint64, .sfixed64: signedRange = (1 << 63, 1 << 63 - 1)
        case .uint32, .fixed32: signedRange = (0, UInt64(UInt32.max))
        default: signedRange = (0, UInt64.max)
        }
        guard negative ? magnitude <= signedRange.min : magnitude <= signedRange.max else {
            throw .value("out of range", field: context.0, in: context.1, at: offset)
        }
        let value: Int64 = negative ? Int64(bitPattern: 0 &- magnitude) : Int64(bitPattern: magnitude)
        switch field.kind {
        case .int32, .int64, .uint32, .uint64, .enumeration: out.appendVarint(UInt64(bitPattern: value))
        case .sint32:
            let v = Int32(truncatingIfNeeded: value)
            out.appendVarint(UInt64(UInt32(bitPattern: (v << 1) ^ (v >> 31))))
        case .sint64: out.appendVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
        case .fixed32, .sfixed32: out.appendLittleEndian(UInt32(truncatingIfNeeded: value))
        default: out.appendLittleEndian(UInt64(bitPattern: value))
        }
        return magnitude != 0
    }

    /// A float or double: a number, or a string holding one or "NaN", "Infinity", "-Infinity".
    private mutating func floatingPoint(_ field: FieldSchema, _ invalid: (String) -> ProtoJSONError)
        throws(ProtoJSONError) -> Bool
    {
        var value: Double
        if scanner.atString() {
            scratch.removeAll()
            try scanner.readString(into: &scratch)
            if scratch.elementsEqual("NaN") {
                value = .nan
            } else if scratch.elementsEqual("Infinity") {
                value = .infinity
            } else if scratch.elementsEqual("-Infinity") {
                value = -.infinity
            } else {
                let text = scratch.bytes
                let parsed: Double? =
                    !text.isEmpty && JSONNumber.scan(text, from: 0, to: text.count) == text.count
                    ? JSONNumber.double(text) : nil
                guard let parsed else { throw invalid("expected a number, \"NaN\", \"Infinity\" or \"-Infinity\"") }
                value = parsed
                guard value.isFinite else { throw invalid("out of range") }
            }
        } else if scanner.atNumber() {
            let range = try scanner.readNumber()
            value = JSONNumber.double(UnsafeRawBufferPointer(rebasing: scanner.bytes[range]))
            guard value.isFinite else { throw invalid("out of range") }
        } else {
            throw invalid("expected a number, \"NaN\", \"Infinity\" or \"-Infinity\"")
        }
        if field.kind == .float {
            let float = Float(value)
            guard float.isFinite || !value.isFinite else { throw invalid("out of range for a float") }
            out.appendLittleEndian(float.bitPattern)
            return float.bitPattern != 0
        }
        out.appendLittleEndian(value.bitPattern)
        return value.bitPattern != 0
    }

    /// The integer the number in `scratch` (a quoted number or map key) denotes, or nil when it is no number.
    private func scratchInteger() -> JSONNumber.IntegerResult? {
        let text = scratch.bytes
        guard !text.isEmpty, JSONNumber.scan(text, from: 0, to: text.count) == text.count else { return nil }
        return JSONNumber.integer(text)
    }

    /// A field name the caller sent, for an error: quoted, shortened, control characters dropped.
    private static func quotedForError(_ name: [UInt8]) -> String {
        let text = String(decoding: name.prefix(64), as: UTF8.self).unicodeScalars.filter { $0.value >= 0x20 && $0 != "\"" }
        return "\"" + String(String.UnicodeScalarView(text)) + (name.count > 64 ? "…" : "") + "\""
    }
}

/// Which fields of a message the JSON has named so far.
private struct FieldSet {
    private var bits: UInt64 = 0
    private var more: [Bool]

    init(count: Int) {
        more = count > 64 ? [Bool](repeating: false, count: count) : []
    }

    /// Records `index`; false when it was recorded before.
    mutating func insert(_ index: Int) -> Bool {
        if more.isEmpty {
            let bit: UInt64 = 1 << UInt64(index)
            if bits & bit != 0 { return false }
            bits |= bit
            return true
        }
        if more[index] { return false }
        more[index] = true
        return true
    }
}
