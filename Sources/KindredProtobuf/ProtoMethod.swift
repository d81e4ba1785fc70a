/// How many messages each side of an RPC sends.
public enum MethodKind: Sendable, Hashable {
    case unary
    case serverStreaming
    case clientStreaming
    case bidirectionalStreaming

    /// True when the client may send more than one message.
    public var isClientStreaming: Bool { self == .clientStreaming || self == .bidirectionalStreaming }
    /// True when the server may send more than one message.
    public var isServerStreaming: Bool { self == .serverStreaming || self == .bidirectionalStreaming }
}

/// A typed RPC: what a gRPC runtime needs to register a handler or make a call without knowing
/// the proto. Generated as `<Service>.Method.<method>`.
public struct ProtoMethod<Request: ProtoMessage, Response: ProtoMessage>: Sendable, Hashable {
    /// Full name of the service, e.g. `"kindred.testing.v1.InteropService"`.
    public let service: String
    /// Name of the method within the service, e.g. `"Echo"`.
    public let name: String
    public let kind: MethodKind
    /// The HTTP/2 `:path`, e.g. `"/kindred.testing.v1.InteropService/Echo"`.
    public let path: String

    public init(service: String, name: String, kind: MethodKind) {
        self.service = service
        self.name = name
        self.kind = kind
        self.path = "/\(service)/\(name)"
    }

    /// The untyped description of this method.
    public var descriptor: ProtoMethodDescriptor {
        ProtoMethodDescriptor(
            service: service,
            name: name,
            kind: kind,
            requestType: Request.self,
            responseType: Response.self
        )
    }
}

/// An RPC without its message types in the type system, for tables of methods.
public struct ProtoMethodDescriptor: Sendable, Hashable, CustomStringConvertible {
    public let service: String
    public let name: String
    public let kind: MethodKind
    public let path: String
    public let requestType: any ProtoMessage.Type
    public let responseType: any ProtoMessage.Type

    public init(
        service: String,
        name: String,
        kind: MethodKind,
        requestType: any ProtoMessage.Type,
        responseType: any ProtoMessage.Type
    ) {
        self.service = service
        self.name = name
        self.kind = kind
        self.path = "/\(service)/\(name)"
        self.requestType = requestType
        self.responseType = responseType
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.path == rhs.path && lhs.kind == rhs.kind
            && ObjectIdentifier(lhs.requestType) == ObjectIdentifier(rhs.requestType)
            && ObjectIdentifier(lhs.responseType) == ObjectIdentifier(rhs.responseType)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(path)
    }

    public var description: String { path }
}

/// A gRPC service: its full name and methods.
public struct ProtoServiceDescriptor: Sendable, Hashable {
    /// Full name, e.g. `"grpc.health.v1.Health"`.
    public let fullName: String
    public let methods: [ProtoMethodDescriptor]

    public init(fullName: String, methods: [ProtoMethodDescriptor]) {
        self.fullName = fullName
        self.methods = methods
    }
}
