import ArgumentParser
import Foundation
import KindredAuth
import KindredGRPC
import KindredGRPCServices
import KindredOpenSSL
import KindredPostgres
import KindredProto
import Logging

/// `auth-server migrate|serve|healthcheck`. Configuration comes from `KINDRED_AUTH_*` environment variables
/// (see services/auth/README.md); all the work happens in `KindredAuth.AuthServer`.
@main
struct AuthServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "auth-server",
        abstract: "The Kindred auth service.",
        subcommands: [Serve.self, Migrate.self, Healthcheck.self, BootstrapAdmin.self],
        defaultSubcommand: Serve.self
    )
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serve the auth gRPC API (and send queued mail).")
    @OptionGroup var logging: ServerLoggingOptions

    func run() async throws {
        let logger = try self.logging.bootstrap(label: "kindred.auth")
        let server = try AuthServer(
            configuration: try AuthConfiguration(environment: ProcessInfo.processInfo.environment),
            logger: logger
        )
        try await server.serve { address in
            logger.notice("listening", metadata: ["net.address": "\(address)"])
        }
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply the auth schema migrations.")
    @OptionGroup var logging: ServerLoggingOptions
    @Option(help: "Directory of NNNN_name.sql files (default KINDRED_AUTH_MIGRATIONS_DIR, else services/auth/migrations).")
    var directory: String?

    func run() async throws {
        let logger = try self.logging.bootstrap(label: "kindred.auth")
        let server = try AuthServer(
            configuration: try AuthConfiguration(environment: ProcessInfo.processInfo.environment),
            logger: logger
        )
        do {
            try await server.migrate(directory: self.directory)
        } catch {
            await server.shutdown()
            // The operator's terminal: the server's own message helps (it never contains user data here).
            if let error = error as? PostgresError { print("migrate failed: \(error) \(error.serverMessage ?? "")") }
            throw error
        }
        await server.shutdown()
    }
}

struct Healthcheck: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Exit 0 when the server at KINDRED_AUTH_LISTEN is SERVING."
    )

    func run() async throws {
        let configuration = try AuthConfiguration(environment: ProcessInfo.processInfo.environment)
        let tls = try configuration.tlsCertificateFile.map { try HealthProbe.tls(trusting: $0) }
        let address = HostPort(host: configuration.listenHost, port: configuration.listenPort)
        guard await HealthProbe.isServing(address, tls: tls) else {
            print("NOT SERVING")
            throw ExitCode(1)
        }
        print("SERVING")
    }
}

struct BootstrapAdmin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bootstrap-admin",
        abstract: "Grant the admin role to an existing account (operator access to the database required)."
    )
    @OptionGroup var logging: ServerLoggingOptions
    @Option(help: "Email address of the account.") var email: String
    @Option(help: "Community of the account (needed when several communities have the address).") var community: String?

    func run() async throws {
        let logger = try self.logging.bootstrap(label: "kindred.auth")
        let server = try AuthServer(
            configuration: try AuthConfiguration(environment: ProcessInfo.processInfo.environment),
            logger: logger
        )
        do {
            let userID = try await server.bootstrapAdmin(email: self.email, community: self.community)
            print("admin granted to user \(userID)")
        } catch {
            await server.shutdown()
            print("bootstrap-admin failed: \(error)")
            throw ExitCode(1)
        }
        await server.shutdown()
    }
}
