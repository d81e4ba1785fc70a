import ArgumentParser
import KindredGRPCServices
import KindredPostgres
import Logging

/// `migrate`: applies the migrations of the server's schema under an advisory lock.
public struct MigrateCommand<Server: ServerDefinition>: AsyncParsableCommand {
    public static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "migrate",
            abstract: Server.schema == nil
                ? "Nothing to migrate: the \(Server.name) keeps no tables (present so every server has the same commands)."
                : "Apply the \(Server.name) schema migrations (needs only the database settings)."
        )
    }
    @OptionGroup var logging: ServerLoggingOptions
    @Option(help: "Directory of NNNN_name.sql files (default KINDRED_<SERVER>_MIGRATIONS_DIR, else services/<server>/migrations).")
    var directory: String?

    public init() {}

    public func run() async throws {
        try await reportingConfigurationErrors {
            let logger = try self.logging.bootstrap(label: Server.loggerLabel)
            guard var database = try Server.database(EnvironmentReader()) else {
                print("\(Server.name): no database, nothing to migrate")
                return
            }
            if let directory = self.directory { database.migrationsDirectory = directory }
            do {
                let applied = try await database.migrate(logger: logger)
                logger.info("migrations applied", metadata: ["db.migrations": "\(applied.count)"])
            } catch let error as PostgresError {
                // The operator's terminal: the server's own message helps (it never contains user data here).
                print("migrate failed: \(error) \(error.serverMessage ?? "")")
                throw ExitCode.failure
            }
        }
    }
}
