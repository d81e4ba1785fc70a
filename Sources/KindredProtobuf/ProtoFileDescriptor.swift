/// One `.proto` file as server reflection serves it: the serialized `FileDescriptorProto`
/// (source info stripped) plus the names needed to find it without parsing it.
public struct ProtoFileDescriptor: Sendable, Hashable {
    /// Path relative to the proto root, e.g. `"grpc/health/v1/health.proto"`.
    public let name: String
    public let package: String
    /// Names of the files it imports.
    public let dependencies: [String]
    /// Full names (no leading dot) of what the file defines: its package, messages (nested
    /// included), enums, enum values, fields, services and methods.
    public let symbols: [String]
    /// Full names of the services it defines.
    public let services: [String]
    /// The `google.protobuf.FileDescriptorProto`, serialized.
    public let serializedBytes: [UInt8]

    public init(
        name: String,
        package: String,
        dependencies: [String],
        symbols: [String],
        services: [String],
        serializedBytes: [UInt8]
    ) {
        self.name = name
        self.package = package
        self.dependencies = dependencies
        self.symbols = symbols
        self.services = services
        self.serializedBytes = serializedBytes
    }

    /// For generated code: the descriptor as base64, which may contain line breaks.
    public init(
        name: String,
        package: String,
        dependencies: [String],
        symbols: [String],
        services: [String],
        base64: String
    ) {
        guard let bytes = Base64.decode(base64) else {
            preconditionFailure("invalid base64 in the generated descriptor of \(name)")
        }
        self.init(
            name: name,
            package: package,
            dependencies: dependencies,
            symbols: symbols,
            services: services,
            serializedBytes: bytes
        )
    }
}

/// A set of files with the lookups server reflection needs.
public struct ProtoFileDescriptorSet: Sendable {
    public let files: [ProtoFileDescriptor]
    private let byName: [String: Int]
    private let bySymbol: [String: Int]

    public init(_ files: [ProtoFileDescriptor]) {
        self.files = files
        var byName: [String: Int] = [:]
        var bySymbol: [String: Int] = [:]
        for (index, file) in files.enumerated() {
            byName[file.name] = byName[file.name] ?? index
            for symbol in file.symbols { bySymbol[symbol] = bySymbol[symbol] ?? index }
        }
        self.byName = byName
        self.bySymbol = bySymbol
    }

    public func file(named name: String) -> ProtoFileDescriptor? {
        byName[name].map { files[$0] }
    }

    /// The file defining `symbol` (a full name without leading dot; one leading dot is ignored).
    public func file(containingSymbol symbol: String) -> ProtoFileDescriptor? {
        let symbol = symbol.hasPrefix(".") ? String(symbol.dropFirst()) : symbol
        return bySymbol[symbol].map { files[$0] }
    }

    /// `file` followed by everything it imports, transitively, each once, dependencies after the
    /// files that import them; what a reflection response should carry.
    public func withDependencies(_ file: ProtoFileDescriptor) -> [ProtoFileDescriptor] {
        var result: [ProtoFileDescriptor] = []
        var seen: Set<String> = []
        var pending = [file]
        while let next = pending.popLast() {
            guard seen.insert(next.name).inserted else { continue }
            result.append(next)
            pending.append(contentsOf: next.dependencies.reversed().compactMap { self.file(named: $0) })
        }
        return result
    }

    /// Full names of every service in the set, sorted.
    public var serviceNames: [String] { files.flatMap(\.services).sorted() }
}
