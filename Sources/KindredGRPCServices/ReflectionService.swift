import KindredGRPC
import KindredProto
import KindredProtobuf

typealias ReflectionV1 = Grpc.Reflection.V1

/// gRPC server reflection (`grpc.reflection.v1` and `v1alpha`), answered from the descriptor set generated
/// with the code, so grpcurl and Postman can list and call methods.
///
/// v1alpha's messages are wire-identical to v1's, so both versions share one implementation over v1's types.
public struct ReflectionService: GRPCService {
    public enum Version: Sendable {
        case v1
        case v1alpha

        var serviceName: String {
            switch self {
            case .v1: "grpc.reflection.v1.ServerReflection"
            case .v1alpha: "grpc.reflection.v1alpha.ServerReflection"
            }
        }
    }

    let version: Version
    let files: ProtoFileDescriptorSet
    /// Services listed by `list_services`: those the server registered.
    let serviceNames: [String]

    public init(version: Version, files: ProtoFileDescriptorSet, serviceNames: [String]) {
        self.version = version
        self.files = files
        self.serviceNames = serviceNames
    }

    public func register(in router: inout GRPCRouter) {
        let method = ProtoMethod<ReflectionV1.ServerReflectionRequest, ReflectionV1.ServerReflectionResponse>(
            service: self.version.serviceName,
            name: "ServerReflectionInfo",
            kind: .bidirectionalStreaming
        )
        router.bidirectionalStreaming(method) { requests, writer, _ in
            for try await request in requests {
                try await writer.write(self.answer(request))
            }
        }
    }

    func answer(_ request: ReflectionV1.ServerReflectionRequest) -> ReflectionV1.ServerReflectionResponse {
        var response = ReflectionV1.ServerReflectionResponse()
        response.validHost = request.host
        response.originalRequest = request
        switch request.messageRequest {
        case .fileByFilename(let name):
            response.messageResponse = self.files(self.files.file(named: name), missing: "file \(name)")
        case .fileContainingSymbol(let symbol):
            response.messageResponse = self.files(self.files.file(containingSymbol: symbol), missing: "symbol \(symbol)")
        case .listServices:
            var list = ReflectionV1.ListServiceResponse()
            list.service = self.serviceNames.map { name in
                var service = ReflectionV1.ServiceResponse()
                service.name = name
                return service
            }
            response.messageResponse = .listServicesResponse(list)
        case .fileContainingExtension, .allExtensionNumbersOfType:
            // Kindred's protos are proto3 and define no extensions.
            response.messageResponse = Self.error(.notFound, "No extensions are defined")
        case nil:
            response.messageResponse = Self.error(.invalidArgument, "Empty reflection request")
        }
        return response
    }

    private func files(
        _ file: ProtoFileDescriptor?,
        missing: String
    ) -> ReflectionV1.ServerReflectionResponse.MessageResponse {
        guard let file else { return Self.error(.notFound, "Unknown \(missing)") }
        var descriptors = ReflectionV1.FileDescriptorResponse()
        descriptors.fileDescriptorProto = self.files.withDependencies(file).map(\.serializedBytes)
        return .fileDescriptorResponse(descriptors)
    }

    private static func error(_ code: StatusCode, _ message: String) -> ReflectionV1.ServerReflectionResponse.MessageResponse {
        var error = ReflectionV1.ErrorResponse()
        error.errorCode = Int32(code.rawValue)
        error.errorMessage = message
        return .errorResponse(error)
    }
}
