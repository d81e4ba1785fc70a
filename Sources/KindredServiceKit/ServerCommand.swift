import ArgumentParser
import Foundation
import KindredGRPCServices
import KindredPostgres
import Logging

/// `<name>-server serve | migrate | healthcheck` (+ the server's own subcommands), the same for every server.
/// A server's `main.swift` is `await ServerCommand<TheServerDefinition>.runFromCommandLine()`.
///
/// - `serve` (the default) builds the server from `KINDRED_<NAME>_*` and serves until SIGTERM/SIGINT.
/// - `migrate` applies the migrations of the server's schema; it reads only the database settings and builds
///   nothing else (no keys, pools or relays), so it can run as a one-shot step before the servers start.
/// - `healthcheck` exits 0 when the server at `KINDRED_<NAME>_LISTEN` answers SERVING on its health service.
///
/// A bad setting stops the command with one line naming the key (never its value) and exit status 78
/// (EX_CONFIG).
public struct ServerCommand<Server: ServerDefinition>: AsyncParsableCommand {
    public static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "\(Server.name)-server",
            abstract: Server.summary,
            discussion: "Settings: KINDRED_\(Server.name.uppercased())_* environment variables (services/\(Server.name)/README.md).",
            subcommands: [ServeCommand<Server>.self, MigrateCommand<Server>.self, HealthcheckCommand<Server>.self]
                + Server.extraCommands,
            defaultSubcommand: ServeCommand<Server>.self
        )
    }

    public init() {}

    /// Parses the process's arguments and runs the chosen subcommand, as `@main` would (a generic type cannot be
    /// `@main`, and a bare `main()` call picks ArgumentParser's synchronous entry point, which refuses async
    /// commands).
    public static func runFromCommandLine() async {
        do {
            var command = try await Self.asyncParseAsRoot(nil)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            Self.exit(withError: error)
        }
    }
}

/// `serve`: the gRPC API, the admin port and the server's background loops.
public struct ServeCommand<Server: ServerDefinition>: AsyncParsableCommand {
    public static var configuration: CommandConfiguration {
        CommandConfiguration(commandName: "serve", abstract: "Serve the \(Server.name) gRPC API until SIGTERM or SIGINT.")
    }
    @OptionGroup var logging: ServerLoggingOptions

    public init() {}

    public func run() async throws {
        try await reportingConfigurationErrors {
            let logger = try self.logging.bootstrap(label: Server.loggerLabel)
            try await Server.serve(settings: EnvironmentReader(), logger: logger)
        }
    }
}

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

/// `healthcheck`: exit 0 when the server is SERVING (compose and the native cluster run it).
public struct HealthcheckCommand<Server: ServerDefinition>: AsyncParsableCommand {
    public static var configuration: CommandConfiguration {
        CommandConfiguration(
            commandName: "healthcheck",
            abstract: "Exit 0 when the server at KINDRED_\(Server.name.uppercased())_LISTEN is SERVING."
        )
    }

    public init() {}

    public func run() async throws {
        try await reportingConfigurationErrors {
            guard try await Server.endpoint(EnvironmentReader()).probe() else {
                print("NOT SERVING")
                throw ExitCode.failure
            }
            print("SERVING")
        }
    }
}

/// Runs `body`; a bad setting becomes one line on stderr naming the key, and exit status 78 (EX_CONFIG).
public func reportingConfigurationErrors(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as ConfigurationError {
        FileHandle.standardError.write(Data("configuration error: \(error)\n".utf8))
        throw ExitCode(78)
    }
}
