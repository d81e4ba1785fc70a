import KindredProtobuf
import NIOCore

/// What a server serves beyond gRPC when `GRPCServerConfiguration.web` is set: gRPC-Web and Connect on the same
/// port, router and handlers (see `WireProtocol`), with CORS for browsers. Internal servers leave it nil and
/// answer only gRPC (anything else gets 415).
public struct WebProtocols: Sendable {
    /// Cross-origin access for browsers; nil (the default): no CORS headers, preflights refused.
    public var cors: CORSPolicy?
    /// Connect's JSON codec (`application/json`, `application/connect+json`); nil: JSON requests get 415.
    public var json: ProtoJSONCodec?
    /// Binary metadata that Connect errors carry as `details` instead: the metadata key (e.g.
    /// `kindred-error-bin`), the message type its value holds, and that type's full name. gRPC and gRPC-Web keep
    /// the metadata as trailers.
    public var errorDetails: [ErrorDetailMetadata] = []
    /// The HTTP/1.1 layer (request decoder with its header caps, header/body/idle deadlines, keep-alive) to serve
    /// the web protocols over HTTP/1.1 on the same port, told apart from HTTP/2 by the connection's first bytes.
    /// Nil: HTTP/2 only.
    public var http1: HTTP1Layer?
    /// The paths of the unary methods that take Connect's GET (`ConnectGet`): those without side effects. Empty
    /// (the default): every GET answers 405.
    public var getMethods: Set<String>

    public init(
        cors: CORSPolicy? = nil,
        json: ProtoJSONCodec? = nil,
        errorDetails: [ErrorDetailMetadata] = [],
        http1: HTTP1Layer? = nil,
        getMethods: Set<String> = []
    ) {
        self.cors = cors
        self.json = json
        self.errorDetails = errorDetails
        self.http1 = http1
        self.getMethods = getMethods
    }

    /// Installs an HTTP/1.1 server layer at the end of a connection's pipeline: handlers that take bytes and pass
    /// on `HTTPServerRequestPart`s (and take `HTTPServerResponsePart`s back). The server adds its call handler
    /// after them. KindredGRPCServices' `HTTP1Port.layer` is the one the plain HTTP ports use.
    public struct HTTP1Layer: Sendable {
        public var configure: @Sendable (ChannelPipeline.SynchronousOperations) throws -> Void

        public init(configure: @escaping @Sendable (ChannelPipeline.SynchronousOperations) throws -> Void) {
            self.configure = configure
        }
    }

    /// A `-bin` metadata key whose value is a serialized message that Connect errors carry as a detail.
    public struct ErrorDetailMetadata: Sendable {
        public var metadataKey: String
        public var messageType: any ProtoMessage.Type

        public init(metadataKey: String, messageType: any ProtoMessage.Type) {
            self.metadataKey = metadataKey
            self.messageType = messageType
        }
    }
}

/// Converts messages between protobuf binary and the proto3 JSON mapping, for Connect JSON. A server library
/// supplies it (the gateway: KindredProtoJSON), so the runtime does not depend on a JSON implementation.
/// `toBinary` throws an `RPCError` (INVALID_ARGUMENT with a message saying what is wrong) for input it refuses.
public struct ProtoJSONCodec: Sendable {
    public var toBinary: @Sendable ([UInt8], any ProtoMessage.Type) throws -> [UInt8]
    public var toJSON: @Sendable ([UInt8], any ProtoMessage.Type) throws -> [UInt8]

    public init(
        toBinary: @escaping @Sendable ([UInt8], any ProtoMessage.Type) throws -> [UInt8],
        toJSON: @escaping @Sendable ([UInt8], any ProtoMessage.Type) throws -> [UInt8]
    ) {
        self.toBinary = toBinary
        self.toJSON = toJSON
    }
}
