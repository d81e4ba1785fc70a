import ArgumentParser
import Foundation
import KindredGRPCServices
import KindredGateway
import Logging

/// `gateway-server serve|migrate|healthcheck`. Configuration comes from `KINDRED_GATEWAY_*` environment
/// variables (see services/gateway/README.md); all the work happens in `KindredGateway.GatewayServer`.
@main
struct GatewayServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway-server",
        abstract: "The Kindred gateway: the public gRPC API in front of the services.",
        subcommands: [Serve.self, Migrate.self, Healthcheck.self],
        defaultSubcommand: Serve.self
    )
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serve the public API.")
    @OptionGroup var logging: ServerLoggingOptions

    func run() async throws {
        let logger = try self.logging.bootstrap(label: "kindred.gateway")
        let server = try GatewayServer(
            configuration: try GatewayConfiguration(environment: ProcessInfo.processInfo.environment),
            logger: logger
        )
        try await server.serve { address in
            logger.notice("listening", metadata: ["net.address": "\(address)"])
        }
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Nothing to migrate: the gateway keeps no tables (present so every server has the same commands)."
    )

    func run() async throws {
        _ = try GatewayConfiguration(environment: ProcessInfo.processInfo.environment)
        print("gateway: no database, nothing to migrate")
    }
}

struct Healthcheck: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Exit 0 when the gateway at KINDRED_GATEWAY_LISTEN is SERVING."
    )

    func run() async throws {
        let configuration = try GatewayConfiguration(environment: ProcessInfo.processInfo.environment)
        let tls = try configuration.tlsCertificateFile.map { try HealthProbe.tls(trusting: $0) }
        guard await HealthProbe.isServing(configuration.listen, tls: tls) else {
            print("NOT SERVING")
            throw ExitCode(1)
        }
        print("SERVING")
    }
}
