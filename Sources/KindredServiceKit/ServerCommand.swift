import ArgumentParser

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
