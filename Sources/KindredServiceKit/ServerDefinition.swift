import ArgumentParser
import KindredGRPCServices
import Logging

/// One Kindred server as the generic `ServerCommand` sees it. A server's executable is a few lines:
///
/// ```swift
/// import KindredAuth
/// import KindredServiceKit
///
/// await ServerCommand<AuthServerDefinition>.runFromCommandLine()
/// ```
///
/// Naming conventions follow from `name`: settings are `KINDRED_<NAME>_*`, the logger is `kindred.<name>`,
/// the migrations are in `services/<name>/migrations`.
public protocol ServerDefinition: Sendable {
    /// The server's short name, lower case: `auth`, `gateway`, `profile`...
    static var name: String { get }
    /// One line for `--help`.
    static var summary: String { get }
    /// The gRPC port when `KINDRED_<NAME>_LISTEN` is unset; the admin port is this + 100.
    static var defaultPort: Int { get }
    /// The PostgreSQL schema the server owns and migrates; nil for a server without tables.
    static var schema: String? { get }
    /// Subcommands beyond `serve`, `migrate` and `healthcheck` (auth's `bootstrap-admin`).
    static var extraCommands: [any ParsableCommand.Type] { get }

    /// What `makeServer` builds.
    associatedtype Server: ServiceServer
    /// Builds the server from its settings (pools, keys, clients, the runner); starts nothing. `serve` runs it,
    /// the test harness starts it on a private database.
    static func makeServer(settings: EnvironmentReader, logger: Logger) async throws -> Server
}

/// A built server: its runner (gRPC services, admin port, background loops) and what to close after it stopped.
public protocol ServiceServer: Sendable {
    var runner: ServerRunner { get }
    /// Closes what the server holds (database pool, worker threads) once the runner has stopped.
    func shutdown() async
}

extension ServerDefinition {
    public static var extraCommands: [any ParsableCommand.Type] { [] }

    /// `KINDRED_<NAME>_`: the prefix of every setting of this server.
    public static var settingsPrefix: String { "KINDRED_\(Self.name.uppercased())_" }

    /// The label of the server's logger: `kindred.<name>`.
    public static var loggerLabel: String { "kindred.\(Self.name)" }

    /// The listen, admin, TLS and access-log settings of this server.
    public static func endpoint(_ settings: EnvironmentReader) throws -> ServerEndpointSettings {
        try ServerEndpointSettings(prefix: Self.settingsPrefix, defaultPort: Self.defaultPort, environment: settings)
    }

    /// Builds the server and serves until SIGTERM/SIGINT: drains, stops its loops, closes its resources. Inside
    /// `ServeHooks.hook` when the executable set one (the OTLP trace export of `KindredOTel`).
    public static func serve(settings: EnvironmentReader, logger: Logger) async throws {
        guard let around = ServeHooks.hook?.around else {
            return try await Self.serveUntilStopped(settings: settings, logger: logger)
        }
        try await around(Self.name, settings.environment, logger) {
            try await Self.serveUntilStopped(settings: settings, logger: logger)
        }
    }

    private static func serveUntilStopped(settings: EnvironmentReader, logger: Logger) async throws {
        let server = try await Self.makeServer(settings: settings, logger: logger)
        do {
            try await server.runner.run(logger: logger) { address in
                logger.notice("listening", metadata: ["net.address": "\(address)"])
            }
        } catch {
            await server.shutdown()
            throw error
        }
        await server.shutdown()
    }

    /// The database settings of this server; nil when it has no tables.
    public static func database(_ settings: EnvironmentReader) throws -> DatabaseSettings? {
        try Self.schema.map { try DatabaseSettings(server: Self.name, schema: $0, environment: settings) }
    }
}
