import KindredProto
import KindredProtobuf
import Testing

@Suite struct RegistryTests {
    private typealias Interop = Kindred.Testing.V1.InteropService

    @Test func methodsCarryPathKindAndTypes() {
        #expect(Interop.fullName == "kindred.testing.v1.InteropService")
        #expect(Interop.Method.echo.path == "/kindred.testing.v1.InteropService/Echo")
        #expect(Interop.Method.echo.kind == .unary)
        #expect(Interop.Method.expand.kind == .serverStreaming)
        #expect(Interop.Method.collect.kind == .clientStreaming)
        #expect(Interop.Method.chat.kind == .bidirectionalStreaming)
        #expect(Interop.Method.chat.kind.isClientStreaming && Interop.Method.chat.kind.isServerStreaming)
        let echo = Interop.Method.echo.descriptor
        #expect(ObjectIdentifier(echo.requestType) == ObjectIdentifier(Kindred.Testing.V1.EchoRequest.self))
        #expect(ObjectIdentifier(echo.responseType) == ObjectIdentifier(Kindred.Testing.V1.EchoResponse.self))
        #expect(Interop.descriptor.methods.contains(echo))
        #expect(Interop.descriptor.methods.map(\.name).starts(with: ["Echo", "Expand", "Collect", "Chat"]))
        #expect(Grpc.Health.V1.Health.Method.check.path == "/grpc.health.v1.Health/Check")
        #expect(Grpc.Health.V1.Health.Method.watch.kind == .serverStreaming)
    }

    @Test func servicesExcludeTestOnlyProtos() {
        let names = ProtoRegistry.services.map(\.fullName)
        #expect(names.contains("grpc.health.v1.Health"))
        #expect(names.contains("grpc.reflection.v1.ServerReflection"))
        #expect(names.contains("grpc.reflection.v1alpha.ServerReflection"))
        #expect(names.contains("kindred.testing.v1.InteropService"))
        #expect(ProtoRegistry.fileDescriptors.serviceNames == names.sorted())
        #expect(ProtoRegistry.fileDescriptors.file(named: "prototest/v1/all_types.proto") == nil)
        #expect(ProtoRegistry.messageTypesByName["prototest.v1.Scalars"] != nil)
    }

    @Test func messageTypesByName() {
        #expect(ProtoRegistry.messageTypesByName.count == ProtoRegistry.allMessageTypes.count)
        for type in ProtoRegistry.allMessageTypes {
            #expect(
                ProtoRegistry.messageTypesByName[type.protoMessageName].map(ObjectIdentifier.init)
                    == ObjectIdentifier(type)
            )
        }
        #expect(Kindred.Testing.V1.EchoRequest.protoMessageName == "kindred.testing.v1.EchoRequest")
        #expect(Prototest.V1.Outer.Middle.Inner.protoMessageName == "prototest.v1.Outer.Middle.Inner")
    }

    @Test func fileDescriptorLookups() throws {
        let files = ProtoRegistry.fileDescriptors
        let health = try #require(files.file(named: "grpc/health/v1/health.proto"))
        #expect(health.package == "grpc.health.v1")
        #expect(health.services == ["grpc.health.v1.Health"])
        #expect(!health.serializedBytes.isEmpty)
        for symbol in [
            "grpc.health.v1.Health", "grpc.health.v1.Health.Check", ".grpc.health.v1.HealthCheckRequest",
            "grpc.health.v1.HealthCheckResponse.ServingStatus", "grpc.health.v1.HealthCheckResponse.SERVING",
        ] {
            #expect(files.file(containingSymbol: symbol)?.name == health.name, "\(symbol)")
        }
        #expect(files.file(containingSymbol: "grpc.health.v1.Nope") == nil)
        // Every import is in the set, and withDependencies returns the file first, then imports.
        for file in files.files {
            let closure = files.withDependencies(file)
            #expect(closure.first == file)
            for dependency in file.dependencies {
                #expect(closure.contains { $0.name == dependency }, "\(file.name) imports \(dependency)")
            }
        }
    }

    @Test func enumCaseNames() {
        #expect(Grpc.Health.V1.HealthCheckResponse.ServingStatus.notServing.rawValue == 2)
        #expect(Grpc.Health.V1.HealthCheckResponse.ServingStatus(rawValue: 3) == .serviceUnknown)
        #expect(Prototest.V1.Color.blueGreen.rawValue == 3)
    }
}
