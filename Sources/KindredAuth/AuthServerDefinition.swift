import ArgumentParser
import KindredGRPCServices
import KindredPostgres
import KindredServiceKit
import Logging

/// The auth service as the generic server command runs it: `auth-server serve | migrate | healthcheck |
/// bootstrap-admin`, settings from `KINDRED_AUTH_*` (services/auth/README.md).
public enum AuthServerDefinition: ServerDefinition {
    public static let name = "auth"
    public static let summary = "The Kindred auth service."
    public static let defaultPort = 50051
    public static let schema: String? = "auth"
    public static var extraCommands: [any ParsableCommand.Type] { [BootstrapAdminCommand.self] }

    public static func makeServer(settings: EnvironmentReader, logger: Logger) async throws -> AuthServer {
        try AuthServer(configuration: AuthConfiguration(settings), logger: logger)
    }
}

/// `auth-server bootstrap-admin --email ADDRESS`: grants the admin role to an existing account. Needs only the
/// database settings (operator access to the database is the authority here).
struct BootstrapAdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bootstrap-admin",
        abstract: "Grant the admin role to an existing account (operator access to the database required)."
    )
    @OptionGroup var logging: ServerLoggingOptions
    @Option(help: "Email address of the account.") var email: String
    @Option(help: "Community of the account (needed when several communities have the address).") var community: String?

    func run() async throws {
        try await reportingConfigurationErrors {
            let logger = try self.logging.bootstrap(label: AuthServerDefinition.loggerLabel)
            let settings = try AuthServerDefinition.database(EnvironmentReader())!
            let database = try settings.makeClient(logger: logger)
            do {
                let userID = try await AuthServer.bootstrapAdmin(
                    email: self.email, community: self.community, database: database)
                await database.shutdown()
                print("admin granted to user \(userID)")
            } catch {
                await database.shutdown()
                print("bootstrap-admin failed: \(error)")
                throw ExitCode(1)
            }
        }
    }
}
