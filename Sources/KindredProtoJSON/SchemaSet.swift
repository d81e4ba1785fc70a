import KindredProtobuf
import KindredProto

/// Every message and enum type the JSON mapping knows, built once from the serialized
/// `FileDescriptorProto`s the code generator embeds (`ProtoRegistry`), and the schema of each Swift
/// message type.
final class SchemaSet: Sendable {
    let messages: [MessageSchema]
    let enums: [EnumSchema]
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

        self.enums = enumDescriptors.map { descriptor in
            var quoted: [(number: Int32, quoted: [UInt8])] = []
            for value in descriptor.values where !quoted.contains(where: { $0.number == value.number }) {
                quoted.append((value.number, Array("\"\(value.name)\"".utf8)))
            }
            quoted.sort { $0.number < $1.number }
            return EnumSchema(name: descriptor.name, quotedNames: quoted, values: descriptor.values)
        }
        self.messages = messageDescriptors.map { descriptor in
            Self.schema(descriptor, messageDescriptors, messageIndex, enumIndex)
        }
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

    private static func schema(
        _ descriptor: DescriptorReader.Message,
        _ messages: [DescriptorReader.Message],
        _ messageIndex: [String: Int],
        _ enumIndex: [String: Int]
    ) -> MessageSchema {
        // Synthetic oneofs (one per proto3 `optional` field) are not oneofs in JSON; renumber the real ones.
        var realOneofs: [Int: Int16] = [:]
        var oneofNames: [String] = []
        for (index, name) in descriptor.oneofNames.enumerated()
        where descriptor.fields.contains(where: { $0.oneofIndex == index && !$0.proto3Optional }) {
            realOneofs[index] = Int16(oneofNames.count)
            oneofNames.append(name)
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
                protoName: field.name,
                jsonName: jsonName,
                jsonKey: Array("\"\(jsonName)\":".utf8)
            )
        }
        fields.sort { $0.number < $1.number }
        let denseCount = min(Int(fields.last?.number ?? 0), 255) + 1
        var fieldIndex = [Int16](repeating: -1, count: denseCount)
        for (index, field) in fields.enumerated() where field.number < denseCount {
            fieldIndex[Int(field.number)] = Int16(index)
        }
        return MessageSchema(
            name: descriptor.name,
            fields: fields,
            oneofNames: oneofNames,
            fieldIndex: fieldIndex,
            isMapEntry: descriptor.isMapEntry
        )
    }
}
