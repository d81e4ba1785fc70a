/// Reads the parts of serialized `google.protobuf.FileDescriptorProto`s the JSON mapping needs:
/// messages (nested too) with their fields, oneofs and map-entry flag, and enums with their values.
/// The input is generated code (`ProtoRegistry`), so malformed input is a build defect and traps.
enum DescriptorReader {
    struct Field {
        var name = ""
        var jsonName = ""
        var number: Int32 = 0
        var label: Int = 1
        var type: Int = 0
        /// Full name with a leading dot, for message and enum fields.
        var typeName = ""
        var oneofIndex: Int?
        var proto3Optional = false
        var packed: Bool?
    }

    struct Message {
        /// Full name without a leading dot.
        var name: String
        var fields: [Field] = []
        var oneofNames: [String] = []
        var isMapEntry = false
    }

    struct Enumeration {
        var name: String
        var values: [(name: String, number: Int32)] = []
    }

    /// Every message and enum type defined in `file`.
    static func read(file bytes: [UInt8], into messages: inout [Message], _ enums: inout [Enumeration]) {
        bytes.withUnsafeBytes { buffer in
            var package = ""
            var reader = WireReader(buffer)
            var messageRanges: [Range<Int>] = []
            var enumRanges: [Range<Int>] = []
            forEachField(&reader) { number, reader in
                switch number {
                case 2: package = string(&reader)
                case 4: messageRanges.append(range(&reader))
                case 5: enumRanges.append(range(&reader))
                default: skip(&reader)
                }
            }
            for range in messageRanges { message(buffer, range, scope: package, &messages, &enums) }
            for range in enumRanges { enums.append(enumeration(buffer, range, scope: package)) }
        }
    }

    private static func message(
        _ buffer: UnsafeRawBufferPointer,
        _ bytes: Range<Int>,
        scope: String,
        _ messages: inout [Message],
        _ enums: inout [Enumeration]
    ) {
        var reader = WireReader(buffer, from: bytes.lowerBound, to: bytes.upperBound)
        var result = Message(name: "")
        var nested: [Range<Int>] = []
        var nestedEnums: [Range<Int>] = []
        forEachField(&reader) { number, reader in
            switch number {
            case 1: result.name = scope.isEmpty ? string(&reader) : scope + "." + string(&reader)
            case 2: result.fields.append(field(buffer, range(&reader)))
            case 3: nested.append(range(&reader))
            case 4: nestedEnums.append(range(&reader))
            case 7: result.isMapEntry = messageOptionsMapEntry(buffer, range(&reader))
            case 8: result.oneofNames.append(oneofName(buffer, range(&reader)))
            default: skip(&reader)
            }
        }
        messages.append(result)
        for range in nested { message(buffer, range, scope: result.name, &messages, &enums) }
        for range in nestedEnums { enums.append(enumeration(buffer, range, scope: result.name)) }
    }

    private static func field(_ buffer: UnsafeRawBufferPointer, _ bytes: Range<Int>) -> Field {
        var reader = WireReader(buffer, from: bytes.lowerBound, to: bytes.upperBound)
        var result = Field()
        forEachField(&reader) { number, reader in
            switch number {
            case 1: result.name = string(&reader)
            case 3: result.number = Int32(truncatingIfNeeded: varint(&reader))
            case 4: result.label = Int(varint(&reader))
            case 5: result.type = Int(varint(&reader))
            case 6: result.typeName = string(&reader)
            case 8: result.packed = fieldOptionsPacked(buffer, range(&reader))
            case 9: result.oneofIndex = Int(varint(&reader))
            case 10: result.jsonName = string(&reader)
            case 17: result.proto3Optional = varint(&reader) != 0
            default: skip(&reader)
            }
        }
        return result
    }

    private static func enumeration(_ buffer: UnsafeRawBufferPointer, _ bytes: Range<Int>, scope: String) -> Enumeration
    {
        var reader = WireReader(buffer, from: bytes.lowerBound, to: bytes.upperBound)
        var result = Enumeration(name: "")
        forEachField(&reader) { number, reader in
            switch number {
            case 1: result.name = scope.isEmpty ? string(&reader) : scope + "." + string(&reader)
            case 2:
                let value = range(&reader)
                var valueReader = WireReader(buffer, from: value.lowerBound, to: value.upperBound)
                var name = ""
                var valueNumber: Int32 = 0
                forEachField(&valueReader) { number, reader in
                    switch number {
                    case 1: name = string(&reader)
                    case 2: valueNumber = Int32(truncatingIfNeeded: varint(&reader))
                    default: skip(&reader)
                    }
                }
                result.values.append((name, valueNumber))
            default: skip(&reader)
            }
        }
        return result
    }

    /// The paths (`/<package>.<Service>/<Method>`) of the unary methods of `file` marked
    /// `option idempotency_level = NO_SIDE_EFFECTS` (`MethodOptions` field 34, value 1).
    static func sideEffectFreeMethods(file bytes: [UInt8]) -> [String] {
        bytes.withUnsafeBytes { buffer in
            var package = ""
            var reader = WireReader(buffer)
            var serviceRanges: [Range<Int>] = []
            forEachField(&reader) { number, reader in
                switch number {
                case 2: package = string(&reader)
                case 6: serviceRanges.append(range(&reader))
                default: skip(&reader)
                }
            }
            var paths: [String] = []
            for serviceRange in serviceRanges {
                var service = WireReader(buffer, from: serviceRange.lowerBound, to: serviceRange.upperBound)
                var name = ""
                var methodRanges: [Range<Int>] = []
                forEachField(&service) { number, reader in
                    switch number {
                    case 1: name = string(&reader)
                    case 2: methodRanges.append(range(&reader))
                    default: skip(&reader)
                    }
                }
                for methodRange in methodRanges {
                    var method = WireReader(buffer, from: methodRange.lowerBound, to: methodRange.upperBound)
                    var methodName = ""
                    var streaming = false
                    var noSideEffects = false
                    forEachField(&method) { number, reader in
                        switch number {
                        case 1: methodName = string(&reader)
                        case 4:
                            let options = range(&reader)
                            var optionReader = WireReader(buffer, from: options.lowerBound, to: options.upperBound)
                            forEachField(&optionReader) { number, reader in
                                if number == 34 { noSideEffects = varint(&reader) == 1 } else { skip(&reader) }
                            }
                        case 5, 6: streaming = streaming || varint(&reader) != 0
                        default: skip(&reader)
                        }
                    }
                    if noSideEffects && !streaming {
                        paths.append("/\(package.isEmpty ? "" : package + ".")\(name)/\(methodName)")
                    }
                }
            }
            return paths
        }
    }

    private static func oneofName(_ buffer: UnsafeRawBufferPointer, _ bytes: Range<Int>) -> String {
        var reader = WireReader(buffer, from: bytes.lowerBound, to: bytes.upperBound)
        var name = ""
        forEachField(&reader) { number, reader in
            if number == 1 { name = string(&reader) } else { skip(&reader) }
        }
        return name
    }

    /// `MessageOptions.map_entry` (field 7).
    private static func messageOptionsMapEntry(_ buffer: UnsafeRawBufferPointer, _ bytes: Range<Int>) -> Bool {
        var reader = WireReader(buffer, from: bytes.lowerBound, to: bytes.upperBound)
        var mapEntry = false
        forEachField(&reader) { number, reader in
            if number == 7 { mapEntry = varint(&reader) != 0 } else { skip(&reader) }
        }
        return mapEntry
    }

    /// `FieldOptions.packed` (field 2), when given.
    private static func fieldOptionsPacked(_ buffer: UnsafeRawBufferPointer, _ bytes: Range<Int>) -> Bool? {
        var reader = WireReader(buffer, from: bytes.lowerBound, to: bytes.upperBound)
        var packed: Bool?
        forEachField(&reader) { number, reader in
            if number == 2 { packed = varint(&reader) != 0 } else { skip(&reader) }
        }
        return packed
    }

    // MARK: Primitives; the bytes come from the code generator, so a failure is a build defect.

    private static func forEachField(_ reader: inout WireReader, _ body: (UInt64, inout WireReader) -> Void) {
        while !reader.isAtEnd {
            guard let tag = reader.varint() else { preconditionFailure("malformed generated descriptor") }
            let start = reader.position
            body(tag >> 3, &reader)
            // Fields the body did not read (it called `skip`) are skipped here by wire type.
            if reader.position == start {
                guard reader.skip(wireType: UInt8(tag & 7)) else { preconditionFailure("malformed generated descriptor") }
            }
        }
    }

    private static func skip(_ reader: inout WireReader) {}

    private static func varint(_ reader: inout WireReader) -> UInt64 {
        guard let value = reader.varint() else { preconditionFailure("malformed generated descriptor") }
        return value
    }

    private static func range(_ reader: inout WireReader) -> Range<Int> {
        guard let range = reader.lengthDelimited() else { preconditionFailure("malformed generated descriptor") }
        return range
    }

    private static func string(_ reader: inout WireReader) -> String {
        let range = range(&reader)
        return String(decoding: UnsafeRawBufferPointer(rebasing: reader.bytes[range]), as: UTF8.self)
    }
}
