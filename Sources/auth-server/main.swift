import ArgumentParser
import Foundation
import KindredAuth
import KindredGRPC
import KindredProto
import Logging

/// `auth-server migrate|serve|healthcheck`. Configuration comes from `KINDRED_AUTH_*` environment variables
/// (see services/auth/README.md); all the work happens in `KindredAuth.AuthServer`.
@main
struct AuthServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "auth-server",
        abstract: "The Kindred auth service.",
        subcommands: [Serve.self, Migrate.self, Healthcheck.self],
        defaultSubcommand: Serve.self
    )
}

struct LoggingOptions: ParsableArguments {
    @Option(help: "Log level (trace, debug, info, notice, warning, error).") var logLevel = "info"

    func bootstrap() -> Logger {
        let level = Logger.Level(rawValue: self.logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        return Logger(label: "kindred.auth")
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serve the auth gRPC API (and send queued mail).")
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = self.logging.bootstrap()
        let server = try AuthServer(configuration: try AuthConfiguration(), logger: logger)
        try await server.serve { address in
            logger.notice("listening", metadata: ["net.address": "\(address)"])
        }
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply the auth schema migrations.")
    @OptionGroup var logging: LoggingOptions
    @Option(help: "Directory of NNNN_name.sql files.") var directory = "services/auth/migrations"

    func run() async throws {
        let logger = self.logging.bootstrap()
        let server = try AuthServer(configuration: try AuthConfiguration(), logger: logger)
        do {
            try await server.migrate(directory: self.directory)
        } catch {
            await server.shutdown()
            throw error
        }
        await server.shutdown()
    }
}

struct Healthcheck: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Exit 0 when the server at KINDRED_AUTH_LISTEN is SERVING.")

    func run() async throws {
        let configuration = try AuthConfiguration()
        let host = configuration.listenHost == "0.0.0.0" ? "127.0.0.1" : configuration.listenHost
        var clientConfiguration = GRPCClientConfiguration(host: host, port: configuration.listenPort)
        clientConfiguration.defaultTimeout = .seconds(3)
        let client = GRPCClient(configuration: clientConfiguration, logger: Logger(label: "kindred.auth.healthcheck"))
        var request = Grpc.Health.V1.HealthCheckRequest()
        request.service = ""
        let serving: Bool
        do {
            serving = try await client.unary(Grpc.Health.V1.Health.Method.check, request).status == .serving
        } catch {
            serving = false
        }
        await client.close()
        if !serving {
            print("NOT SERVING")
            throw ExitCode(1)
        }
        print("SERVING")
    }
}
