import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredPostgresTesting
import KindredServiceKit
import Logging

/// A real server of any Kindred service for tests: built by its `ServerDefinition` from settings, on a free
/// port of 127.0.0.1, with its own freshly migrated database on the test run's PostgreSQL (a clone of a
/// template migrated once), and stopped the way SIGTERM stops it.
///
/// ```swift
/// let auth = try await TestServer<AuthServerDefinition>.start(settings: ["KINDRED_AUTH_SMTP_PORT": "9"])
/// defer { Task { await auth.stop() } }
/// let client = auth.makeClient()
/// ```
public struct TestServer<Definition: ServerDefinition>: Sendable {
    /// The built server (its stores, pools, runner).
    public let server: Definition.Server
    /// The settings it was built from (the database URL among them).
    public let settings: [String: String]
    private let running: RunningServer

    /// The gRPC port.
    public var port: Int { self.running.port }

    /// Builds and starts the server. `settings` are `KINDRED_<NAME>_*` values on top of the harness's own:
    /// listen `127.0.0.1:0`, admin port off, and for a server with tables a new database migrated from
    /// `services/<name>/migrations` with a pool of 4.
    public static func start(
        settings extra: [String: String] = [:],
        logger: Logger = Logger(label: "kindred.test-server", factory: { _ in SwiftLogNoOpLogHandler() }),
        repositoryRoot: String = TestServerSupport.repositoryRoot()
    ) async throws -> TestServer {
        let prefix = Definition.settingsPrefix
        var settings = [prefix + "LISTEN": "127.0.0.1:0", prefix + "ADMIN_LISTEN": "off"]
        if let schema = Definition.schema {
            let migrations = extra[prefix + "MIGRATIONS_DIR"] ?? repositoryRoot + "/services/\(Definition.name)/migrations"
            let postgres = try await TestPostgres.shared()
            settings[prefix + "DATABASE_URL"] = try await postgres.createMigratedDatabase(schema: schema, migrations: migrations)
            settings[prefix + "DATABASE_POOL_SIZE"] = "4"
            settings[prefix + "MIGRATIONS_DIR"] = migrations
        }
        settings.merge(extra) { $1 }
        let server = try await Definition.makeServer(settings: EnvironmentReader(settings), logger: logger)
        do {
            let running = try await server.runner.start(logger: logger)
            return TestServer(server: server, settings: settings, running: running)
        } catch {
            await server.shutdown()
            throw error
        }
    }

    /// A client of the server (close it when done).
    public func makeClient(logger: Logger = Logger(label: "kindred.test-client")) -> GRPCClient {
        GRPCClient(configuration: GRPCClientConfiguration(host: "127.0.0.1", port: self.port), logger: logger)
    }

    /// Drains calls, stops the loops, then closes the server's resources.
    public func stop() async {
        await self.running.stop()
        await self.server.shutdown()
    }
}

public enum TestServerSupport {
    /// The package root: the first folder above `file` holding `Package.swift`.
    public static func repositoryRoot(file: String = #filePath) -> String {
        var url = URL(fileURLWithPath: file).deletingLastPathComponent()
        while url.path != "/" {
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url.path }
            url.deleteLastPathComponent()
        }
        return FileManager.default.currentDirectoryPath
    }
}
