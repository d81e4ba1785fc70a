import KindredProto
import KindredProtobuf

/// Every message and enum type the JSON mapping knows, built once from the serialized
/// `FileDescriptorProto`s the code generator embeds (`ProtoRegistry`), and the schema of each Swift
/// message type.
///
/// The schemas are plain values in memory that is never freed (the set lives as long as the
/// process), so that the converters read them without reference counting.
final class SchemaSet: @unchecked Sendable {
    // Safety: everything is written in `init` and only read afterwards.

    let messages: UnsafeBufferPointer<MessageSchema>
    let enums: UnsafeBufferPointer<EnumSchema>
    private let byType: [ObjectIdentifier: Int]
    private let byName: [String: Int]

    /// The schema of every generated message type.
    static let generated = SchemaSet(
        files: ProtoRegistry.fileDescriptors.files + ProtoRegistry.testFileDescriptors.files,
        types: ProtoRegistry.allMessageTypes
    )

    init(files: [ProtoFileDescriptor], types: [any ProtoMessage.Type]) {
        var messageDescriptors: [DescriptorReader.Message] = []
        var enumDescriptors: [DescriptorReader.Enumeration] = []
        var seenFiles: Set<String> = []
        for file in files where seenFiles.insert(file.name).inserted {
            DescriptorReader.read(file: file.serializedBytes, into: &messageDescriptors, &enumDescriptors)
        }
        var messageIndex: [String: Int] = [:]
        for (index, message) in messageDescriptors.enumerated() { messageIndex[message.name] = index }
        var enumIndex: [String: Int] = [:]
        for (index, enumeration) in enumDescriptors.enumerated() { enumIndex[enumeration.name] = index }

        self.enums = Self.permanent(
            enumDescriptors.map { descriptor in
                let values = descriptor.values.map { value in
                    EnumSchema.Value(number: value.number, name: Self.name(value.name), quoted: Self.name("\"\(value.name)\""))
                }
                var byNumber: [EnumSchema.Value] = []
                for value in values where !byNumber.contains(where: { $0.number == value.number }) { byNumber.append(value) }
                byNumber.sort { $0.number < $1.number }
                return EnumSchema(
                    fullName: Self.name(descriptor.name),
                    byNumber: Self.permanent(byNumber),
                    values: Self.permanent(values)
                )
            })
        self.messages = Self.permanent(
            messageDescriptors.map { descriptor in
                Self.schema(descriptor, messageDescriptors, messageIndex, enumIndex)
            })
        self.byName = messageIndex
        var byType: [ObjectIdentifier: Int] = [:]
        for type in types {
            guard let index = messageIndex[type.protoMessageName] else {
                preconditionFailure("no descriptor for \(type.protoMessageName): regenerate with proto/generate.sh")
            }
            byType[ObjectIdentifier(type)] = index
        }
        self.byType = byType
    }

    /// The index into `messages` of `type`'s schema.
    func index(of type: any ProtoMessage.Type) -> Int? {
        byType[ObjectIdentifier(type)] ?? byName[type.protoMessageName]
    }

    /// A copy of `values` in memory that is never freed.
    private static func permanent<T>(_ values: [T]) -> UnsafeBufferPointer<T> {
        let storage = UnsafeMutableBufferPointer<T>.allocate(capacity: max(values.count, 1))
        _ = storage.initialize(from: values)
        return UnsafeBufferPointer(rebasing: storage[0..<values.count])
    }

    private static func name(_ text: String) -> SchemaName {
        SchemaName(bytes: UnsafeRawBufferPointer(permanent(Array(text.utf8))))
    }

    private static func schema(
        _ descriptor: DescriptorReader.Message,
        _ messages: [DescriptorReader.Message],
        _ messageIndex: [String: Int],
        _ enumIndex: [String: Int]
    ) -> MessageSchema {
        // Synthetic oneofs (one per proto3 `optional` field) are not oneofs in JSON; renumber the real ones.
        var realOneofs: [Int: Int16] = [:]
        var oneofNames: [SchemaName] = []
        for (index, name) in descriptor.oneofNames.enumerated()
        where descriptor.fields.contains(where: { $0.oneofIndex == index && !$0.proto3Optional }) {
            realOneofs[index] = Int16(oneofNames.count)
            oneofNames.append(Self.name(name))
        }
        var fields: [FieldSchema] = descriptor.fields.map { field in
            guard let kind = FieldKind(rawValue: UInt8(clamping: field.type)) else {
                preconditionFailure("\(descriptor.name).\(field.name): groups are not supported")
            }
            let typeName = field.typeName.hasPrefix(".") ? String(field.typeName.dropFirst()) : field.typeName
            precondition(
                !typeName.hasPrefix("google.protobuf."),
                "\(descriptor.name).\(field.name): well-known types need their special JSON forms, not implemented"
            )
            let message = kind == .message ? messageIndex[typeName] : nil
            precondition(kind != .message || message != nil, "no descriptor for \(typeName)")
            let enumeration = kind == .enumeration ? enumIndex[typeName] : nil
            precondition(kind != .enumeration || enumeration != nil, "no descriptor for \(typeName)")
            let isRepeated = field.label == 3
            let isMap = isRepeated && message.map { messages[$0].isMapEntry } == true
            let jsonName = field.jsonName.isEmpty ? field.name : field.jsonName
            return FieldSchema(
                number: field.number,
                kind: kind,
                isRepeated: isRepeated,
                isPacked: isRepeated && kind.isPackable && field.packed != false,
                isMap: isMap,
                hasPresence: field.oneofIndex != nil || (!isRepeated && kind == .message),
                oneof: field.oneofIndex.flatMap { realOneofs[$0] } ?? -1,
                message: Int32(message ?? -1),
                enumeration: Int32(enumeration ?? -1),
                protoName: Self.name(field.name),
                jsonName: Self.name(jsonName),
                jsonKey: Self.name("\"\(jsonName)\":")
            )
        }
        fields.sort { $0.number < $1.number }
        let denseCount = min(Int(fields.last?.number ?? 0), 255) + 1
        var fieldIndex = [Int16](repeating: -1, count: denseCount)
        for (index, field) in fields.enumerated() where field.number < denseCount {
            fieldIndex[Int(field.number)] = Int16(index)
        }
        return MessageSchema(
            fullName: Self.name(descriptor.name),
            fields: Self.permanent(fields),
            oneofNames: Self.permanent(oneofNames),
            fieldIndex: Self.permanent(fieldIndex),
            isMapEntry: descriptor.isMapEntry
        )
    }
}
