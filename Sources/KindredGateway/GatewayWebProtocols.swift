import KindredGRPC
import KindredGRPCServices
import KindredProto
import KindredProtoJSON

extension WebProtocols {
    /// What the gateway serves beside gRPC: gRPC-Web and Connect (binary and JSON) for browsers and curl, CORS for
    /// the configured origins, Kindred's `ErrorDetail` as the detail of Connect errors, and Connect's GET for the
    /// methods the protos mark `NO_SIDE_EFFECTS`.
    /// HTTP/1.1 on the gRPC port goes through the plain HTTP ports' layer (`HTTP1Port.configure`) with
    /// `configuration.webLimits`; its counters are `http_*{port="web"}`.
    static func gateway(_ configuration: GatewayConfiguration, metrics: HTTP1PortMetrics) -> WebProtocols {
        WebProtocols(
            cors: CORSPolicy(allowedOrigins: configuration.corsOrigins, maxAge: configuration.corsMaxAge),
            json: .protoJSON,
            errorDetails: [
                .init(metadataKey: Kindred.Common.V1.ErrorDetail.metadataKey, messageType: Kindred.Common.V1.ErrorDetail.self)
            ],
            http1: HTTP1Port.layer(limits: configuration.webLimits, metrics: metrics),
            getMethods: ProtoJSON.sideEffectFreeMethods()
        )
    }
}

extension ProtoJSONCodec {
    /// The proto3 JSON mapping of `KindredProtoJSON`; input it refuses is INVALID_ARGUMENT with its message
    /// (which names the field, never echoes the value).
    static let protoJSON = ProtoJSONCodec(
        toBinary: { json, type in
            do {
                return try ProtoJSON.binary(fromJSON: json, of: type)
            } catch let error as ProtoJSONError {
                throw RPCError(.invalidArgument, error.message)
            }
        },
        toJSON: { bytes, type in try ProtoJSON.json(fromBinary: bytes, of: type) }
    )
}
