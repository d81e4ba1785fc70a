import KindredProtobuf

/// Protobuf binary → proto3 JSON, driven by `SchemaSet`.
///
/// Each message is read in two steps: its fields are listed (number, wire type, value range) in a
/// scratch list shared by all levels, then written in field-number order, which also gives protobuf's
/// rules for fields that occur more than once: the last value of a singular scalar wins, occurrences
/// of a singular message merge, repeated values concatenate (packed or not), the member of a oneof
/// seen last wins. Unknown fields are dropped, as the JSON mapping says.
struct BinaryToJSON {
    private struct Entry {
        var field: Int32
        var wireType: UInt8
        /// The value's bytes (for length-delimited values, the contents after the length).
        var start: Int32
        var end: Int32
    }

    private let schemas: SchemaSet
    var out: OutputBuffer
    private var entries = ScratchStack<Entry>(capacity: 64)
    /// Per oneof of the messages being written: the member seen last and where.
    private var winners = ScratchStack<Entry>(capacity: 8)

    init(schemas: SchemaSet, capacity: Int) {
        self.schemas = schemas
        out = OutputBuffer(capacity: capacity)
    }

    /// Frees the buffers (after the output is copied out).
    func deallocate() {
        out.deallocate()
        entries.deallocate()
        winners.deallocate()
    }

    mutating func message(_ index: Int, _ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, depth: Int)
        throws(ProtoJSONError)
    {
        let schema = schemas.messages[index]
        guard depth <= ProtoDecodingLimits.maximumNesting else {
            throw ProtoJSONError("messages nested more than \(ProtoDecodingLimits.maximumNesting) deep in \(schema.name)")
        }
        let fields = schema.fields
        let base = entries.count
        var reader = WireReader(bytes, from: range.lowerBound, to: range.upperBound)
        var sorted = true
        var lastField: Int32 = -1
        while !reader.isAtEnd {
            guard let tag = reader.varint(), tag >> 3 > 0, tag >> 3 <= UInt64(Int32.max) else {
                throw .malformedBinary(schema)
            }
            let wireType = UInt8(tag & 7)
            let start: Int
            let end: Int
            if wireType == 2 {
                guard let value = reader.lengthDelimited() else { throw .malformedBinary(schema) }
                (start, end) = (value.lowerBound, value.upperBound)
            } else {
                start = reader.position
                guard reader.skip(wireType: wireType) else { throw .malformedBinary(schema) }
                end = reader.position
            }
            guard let fieldIndex = schema.index(ofNumber: tag >> 3) else { continue }
            let field = fields[fieldIndex]
            guard field.kind.wireType == wireType || (field.isPacked || field.isRepeated && field.kind.isPackable) && wireType == 2
            else { throw .malformedBinary(schema) }
            entries.push(Entry(field: Int32(fieldIndex), wireType: wireType, start: Int32(start), end: Int32(end)))
            if Int32(fieldIndex) < lastField { sorted = false }
            lastField = Int32(fieldIndex)
        }
        let levelEnd = entries.count
        if !sorted {
            var slice = entries.slice(base..<levelEnd)
            slice.sort { ($0.field, $0.start) < ($1.field, $1.start) }
        }
        // The winning member of each oneof: the one that occurred last.
        let winnersBase = winners.count
        if !schema.oneofNames.isEmpty {
            for _ in 0..<schema.oneofNames.count { winners.push(Entry(field: -1, wireType: 0, start: -1, end: -1)) }
            for index in base..<levelEnd {
                let entry = entries[index]
                let oneof = Int(fields[Int(entry.field)].oneof)
                if oneof >= 0 && entry.start > winners[winnersBase + oneof].start {
                    winners[winnersBase + oneof] = entry
                }
            }
        }

        out.append(UInt8(ascii: "{"))
        var first = true
        var group = base
        while group < levelEnd {
            let fieldIndex = entries[group].field
            var groupEnd = group + 1
            while groupEnd < levelEnd && entries[groupEnd].field == fieldIndex { groupEnd += 1 }
            defer { group = groupEnd }
            let field = fields[Int(fieldIndex)]
            if field.oneof >= 0 && winners[winnersBase + Int(field.oneof)].field != fieldIndex { continue }
            let mark = out.count
            if !first { out.append(UInt8(ascii: ",")) }
            out.append(field.jsonKey)
            let written: Bool
            if field.isMap {
                written = try map(field, bytes, group..<groupEnd, schema, depth: depth)
            } else if field.isRepeated {
                written = try repeated(field, bytes, group..<groupEnd, schema, depth: depth)
            } else {
                let entry = entries[groupEnd - 1]
                if field.kind == .message && groupEnd - group > 1 {
                    try mergedMessage(field, bytes, group..<groupEnd, depth: depth)
                    written = true
                } else {
                    written = try value(
                        field,
                        bytes,
                        Int(entry.start)..<Int(entry.end),
                        schema,
                        depth: depth,
                        omitDefault: !field.hasPresence
                    )
                }
            }
            if written { first = false } else { out.truncate(to: mark) }
        }
        out.append(UInt8(ascii: "}"))
        entries.pop(to: base)
        winners.pop(to: winnersBase)
    }

    /// A singular message that occurs more than once: the occurrences concatenated are their merge.
    private mutating func mergedMessage(_ field: FieldSchema, _ bytes: UnsafeRawBufferPointer, _ group: Range<Int>, depth: Int)
        throws(ProtoJSONError)
    {
        var merged: [UInt8] = []
        for index in group {
            let entry = entries[index]
            merged.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[Int(entry.start)..<Int(entry.end)]))
        }
        // withUnsafeBytes rethrows untyped errors; carry the typed one out.
        var failure: ProtoJSONError?
        merged.withUnsafeBytes { buffer in
            do throws(ProtoJSONError) {
                try message(Int(field.message), buffer, 0..<buffer.count, depth: depth + 1)
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    private mutating func repeated(
        _ field: FieldSchema,
        _ bytes: UnsafeRawBufferPointer,
        _ group: Range<Int>,
        _ schema: MessageSchema,
        depth: Int
    ) throws(ProtoJSONError) -> Bool {
        out.append(UInt8(ascii: "["))
        var count = 0
        for index in group {
            let entry = entries[index]
            if entry.wireType == 2 && field.kind.isPackable {
                var reader = WireReader(bytes, from: Int(entry.start), to: Int(entry.end))
                while !reader.isAtEnd {
                    let start = reader.position
                    guard reader.skip(wireType: field.kind.wireType) else { throw .malformedBinary(schema) }
                    if count > 0 { out.append(UInt8(ascii: ",")) }
                    _ = try value(field, bytes, start..<reader.position, schema, depth: depth, omitDefault: false)
                    count += 1
                }
            } else {
                if count > 0 { out.append(UInt8(ascii: ",")) }
                _ = try value(field, bytes, Int(entry.start)..<Int(entry.end), schema, depth: depth, omitDefault: false)
                count += 1
            }
        }
        out.append(UInt8(ascii: "]"))
        return count > 0
    }

    /// A map entry's key and value ranges (nil when absent) and the key's value for comparing keys.
    private struct MapEntry {
        var key: Range<Int>?
        var keyWireType: UInt8 = 0
        var value: Range<Int>?
    }

    private func mapEntry(_ entry: Entry, _ bytes: UnsafeRawBufferPointer, _ entrySchema: MessageSchema)
        throws(ProtoJSONError) -> MapEntry
    {
        var result = MapEntry()
        var reader = WireReader(bytes, from: Int(entry.start), to: Int(entry.end))
        while !reader.isAtEnd {
            guard let tag = reader.varint() else { throw .malformedBinary(entrySchema) }
            let wireType = UInt8(tag & 7)
            var start = reader.position
            var end: Int
            if wireType == 2 {
                guard let range = reader.lengthDelimited() else { throw .malformedBinary(entrySchema) }
                (start, end) = (range.lowerBound, range.upperBound)
            } else {
                guard reader.skip(wireType: wireType) else { throw .malformedBinary(entrySchema) }
                end = reader.position
            }
            guard tag >> 3 == 1 || tag >> 3 == 2 else { continue }
            let field = entrySchema.fields[Int(tag >> 3) - 1]
            guard field.kind.wireType == wireType else { throw .malformedBinary(entrySchema) }
            if tag >> 3 == 1 { result.key = start..<end } else { result.value = start..<end }
        }
        return result
    }

    private mutating func map(
        _ field: FieldSchema,
        _ bytes: UnsafeRawBufferPointer,
        _ group: Range<Int>,
        _ schema: MessageSchema,
        depth: Int
    ) throws(ProtoJSONError) -> Bool {
        let entrySchema = schemas.messages[Int(field.message)]
        let keyField = entrySchema.fields[0]
        let valueField = entrySchema.fields[1]
        out.append(UInt8(ascii: "{"))
        var count = 0
        for index in group {
            let entry = try mapEntry(entries[index], bytes, entrySchema)
            // A key that occurs again later is overwritten by that later entry.
            var overwritten = false
            for later in (index + 1)..<group.upperBound {
                let other = try mapEntry(entries[later], bytes, entrySchema)
                if sameKey(entry.key, other.key, keyField.kind, bytes) {
                    overwritten = true
                    break
                }
            }
            if overwritten { continue }
            if count > 0 { out.append(UInt8(ascii: ",")) }
            count += 1
            if let key = entry.key {
                if keyField.kind == .string {
                    guard out.appendJSONString(UnsafeRawBufferPointer(rebasing: bytes[key])) else {
                        throw ProtoJSONError("a map key of field \"\(field.jsonName.string)\" of \(schema.name) is not valid UTF-8")
                    }
                } else {
                    out.append(UInt8(ascii: "\""))
                    _ = try value(keyField, bytes, key, entrySchema, depth: depth, omitDefault: false, quoted: false)
                    out.append(UInt8(ascii: "\""))
                }
            } else {
                switch keyField.kind {
                case .string: out.appendASCII("\"\"")
                case .bool: out.appendASCII("\"false\"")
                default: out.appendASCII("\"0\"")
                }
            }
            out.append(UInt8(ascii: ":"))
            if let value = entry.value {
                _ = try self.value(valueField, bytes, value, entrySchema, depth: depth, omitDefault: false)
            } else {
                try defaultValue(valueField)
            }
        }
        out.append(UInt8(ascii: "}"))
        return count > 0
    }

    private func sameKey(_ a: Range<Int>?, _ b: Range<Int>?, _ kind: FieldKind, _ bytes: UnsafeRawBufferPointer) -> Bool {
        func canonical(_ range: Range<Int>?) -> UInt64 {
            guard let range else { return 0 }
            var reader = WireReader(bytes, from: range.lowerBound, to: range.upperBound)
            switch kind.wireType {
            case 0:
                let raw = reader.varint() ?? 0
                switch kind {
                case .bool: return raw != 0 ? 1 : 0
                case .int32, .uint32, .sint32: return UInt64(UInt32(truncatingIfNeeded: raw))
                default: return raw
                }
            case 5: return UInt64(reader.fixed32() ?? 0)
            default: return reader.fixed64() ?? 0
            }
        }
        if kind == .string {
            let left = a.map { UnsafeRawBufferPointer(rebasing: bytes[$0]) } ?? UnsafeRawBufferPointer(start: nil, count: 0)
            let right = b.map { UnsafeRawBufferPointer(rebasing: bytes[$0]) } ?? UnsafeRawBufferPointer(start: nil, count: 0)
            return left.elementsEqual(right)
        }
        return canonical(a) == canonical(b)
    }

    /// The JSON of a map value the entry leaves out: the value type's default.
    private mutating func defaultValue(_ field: FieldSchema) throws(ProtoJSONError) {
        switch field.kind {
        case .message: out.appendASCII("{}")
        case .string, .bytes: out.appendASCII("\"\"")
        case .bool: out.appendASCII("false")
        case .enumeration:
            if let name = schemas.enums[Int(field.enumeration)].quotedName(of: 0) { out.append(name) } else {
                out.append(UInt8(ascii: "0"))
            }
        case .int64, .uint64, .fixed64, .sfixed64, .sint64: out.appendASCII("\"0\"")
        default: out.append(UInt8(ascii: "0"))
        }
    }

    /// Writes one value of `field` from its bytes; returns false, writing nothing, when `omitDefault`
    /// and the value is the default. `quoted: false` writes 64-bit integers bare (map keys quote them).
    private mutating func value(
        _ field: FieldSchema,
        _ bytes: UnsafeRawBufferPointer,
        _ range: Range<Int>,
        _ schema: MessageSchema,
        depth: Int,
        omitDefault: Bool,
        quoted: Bool = true
    ) throws(ProtoJSONError) -> Bool {
        var reader = WireReader(bytes, from: range.lowerBound, to: range.upperBound)
        switch field.kind.wireType {
        case 0:
            guard let raw = reader.varint(), reader.isAtEnd else { throw .malformedBinary(schema) }
            if omitDefault {
                let is32Bit = field.kind == .int32 || field.kind == .uint32 || field.kind == .sint32 || field.kind == .enumeration
                if (is32Bit ? UInt64(UInt32(truncatingIfNeeded: raw)) : raw) == 0 { return false }
            }
            switch field.kind {
            case .int32: out.appendDecimal(Int64(Int32(truncatingIfNeeded: raw)))
            case .uint32: out.appendDecimal(UInt64(UInt32(truncatingIfNeeded: raw)))
            case .sint32:
                let value = UInt32(truncatingIfNeeded: raw)
                out.appendDecimal(Int64(Int32(bitPattern: value >> 1) ^ -Int32(bitPattern: value & 1)))
            case .bool:
                if raw != 0 { out.appendASCII("true") } else { out.appendASCII("false") }
            case .enumeration:
                let number = Int32(truncatingIfNeeded: raw)
                if let name = schemas.enums[Int(field.enumeration)].quotedName(of: number) {
                    out.append(name)
                } else {
                    out.appendDecimal(Int64(number))
                }
            case .int64: quotedInteger(quoted) { $0.appendDecimal(Int64(bitPattern: raw)) }
            case .uint64: quotedInteger(quoted) { $0.appendDecimal(raw) }
            case .sint64: quotedInteger(quoted) { $0.appendDecimal(Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)) }
            default: preconditionFailure("not a varint kind")
            }
        case 5:
            guard let raw = reader.fixed32(), reader.isAtEnd else { throw .malformedBinary(schema) }
            if omitDefault && raw == 0 { return false }
            switch field.kind {
            case .fixed32: out.appendDecimal(UInt64(raw))
            case .sfixed32: out.appendDecimal(Int64(Int32(bitPattern: raw)))
            default: out.appendJSON(Float(bitPattern: raw))
            }
        case 1:
            guard let raw = reader.fixed64(), reader.isAtEnd else { throw .malformedBinary(schema) }
            if omitDefault && raw == 0 { return false }
            switch field.kind {
            case .fixed64: quotedInteger(quoted) { $0.appendDecimal(raw) }
            case .sfixed64: quotedInteger(quoted) { $0.appendDecimal(Int64(bitPattern: raw)) }
            default: out.appendJSON(Double(bitPattern: raw))
            }
        default:
            if omitDefault && range.isEmpty && field.kind != .message { return false }
            let contents = UnsafeRawBufferPointer(rebasing: bytes[range])
            switch field.kind {
            case .string:
                guard out.appendJSONString(contents) else {
                    throw ProtoJSONError("field \"\(field.jsonName.string)\" of \(schema.name) is not valid UTF-8")
                }
            case .bytes:
                out.append(UInt8(ascii: "\""))
                JSONBase64.encode(contents, into: &out)
                out.append(UInt8(ascii: "\""))
            default:
                try message(Int(field.message), bytes, range, depth: depth + 1)
            }
        }
        return true
    }

    @inline(__always)
    private mutating func quotedInteger(_ quoted: Bool, _ write: (inout OutputBuffer) -> Void) {
        if quoted { out.append(UInt8(ascii: "\"")) }
        write(&out)
        if quoted { out.append(UInt8(ascii: "\"")) }
    }
}
