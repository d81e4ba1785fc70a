import CoreMetrics
import KindredGRPCServices
import KindredPostgres
import Logging

/// The database settings every server with tables reads the same way under its own prefix.
public struct DatabaseSettings: Sendable, Equatable {
    /// The schema the server owns (its tables, its `schema_migrations`); also its `search_path`.
    public var schema: String
    /// The `application_name` the server's connections show in `pg_stat_activity`: `kindred-<server>`.
    public var applicationName: String
    /// `KINDRED_<SERVER>_DATABASE_URL` (libpq URL or conninfo), default `postgresql:///kindred`.
    public var url = "postgresql:///kindred"
    /// `KINDRED_<SERVER>_DATABASE_POOL_SIZE` (int, 1...500), default 10: connections the server may open.
    public var poolSize = 10
    /// `KINDRED_<SERVER>_MIGRATIONS_DIR` (path), default `services/<server>/migrations` (relative to the working
    /// directory; the container image sets it).
    public var migrationsDirectory: String
    /// `KINDRED_<SERVER>_READ_DATABASE_URL` (libpq URL or conninfo): a streaming standby of the database for the
    /// reads the server allows to be slightly stale (``StandbyReads``); nil (the default) = every read on the primary.
    public var readURL: String?
    /// `KINDRED_<SERVER>_READ_MAX_LAG_MS` (int 1...600000), default 2000: the most staleness of the standby that reads
    /// still go to it; further behind, they go to the primary.
    public var readMaxLag: Duration = .seconds(2)

    /// The defaults for `server` owning `schema`.
    public init(server: String, schema: String) {
        self.schema = schema
        self.applicationName = "kindred-\(server)"
        self.migrationsDirectory = "services/\(server)/migrations"
    }

    /// Reads `KINDRED_<SERVER>_DATABASE_URL` (or `..._DATABASE_URL_FILE`), `..._DATABASE_POOL_SIZE`,
    /// `..._DATABASE_SCHEMA` (default the server's schema) and `..._MIGRATIONS_DIR`.
    public init(server: String, schema: String, environment: EnvironmentReader) throws {
        self.init(server: server, schema: schema)
        let prefix = "KINDRED_\(server.uppercased())_"
        // A secret (it may hold the password), so `..._DATABASE_URL_FILE` may name a file holding it.
        self.url = try environment.secret(prefix + "DATABASE_URL", length: 1...4096) ?? self.url
        // Checked here rather than at the first query, so a typo stops the start naming the key.
        guard (try? PostgresConfiguration(self.url)) != nil else {
            throw ConfigurationError(key: prefix + "DATABASE_URL", problem: "must be a libpq URL or conninfo string")
        }
        self.poolSize = try environment.int(prefix + "DATABASE_POOL_SIZE", default: self.poolSize, in: 1...500)
        // A second copy of the server's tables in the same database (discovery's shards: one projection each).
        self.schema = try environment.value(
            prefix + "DATABASE_SCHEMA", default: self.schema, problem: "must be a lower-case identifier (a-z, 0-9, _)"
        ) { text in
            text.count <= 63 && text.first.map { $0 == "_" || ("a"..."z").contains($0) } == true
                && text.allSatisfy { $0 == "_" || ("a"..."z").contains($0) || ("0"..."9").contains($0) } ? text : nil
        }
        self.migrationsDirectory = environment.string(prefix + "MIGRATIONS_DIR") ?? self.migrationsDirectory
        self.readURL = try environment.secret(prefix + "READ_DATABASE_URL", length: 1...4096)
        if let readURL = self.readURL, (try? PostgresConfiguration(readURL)) == nil {
            throw ConfigurationError(key: prefix + "READ_DATABASE_URL", problem: "must be a libpq URL or conninfo string")
        }
        self.readMaxLag = try environment.milliseconds(prefix + "READ_MAX_LAG_MS", default: self.readMaxLag, in: 1...600_000)
    }

    /// A connection pool for the server: its schema first on the search path, its application name.
    public func makeClient(logger: Logger) throws -> PostgresClient {
        var postgres = try PostgresConfiguration(self.url)
        postgres.applicationName = self.applicationName
        postgres.settings["search_path"] = self.schema
        var pool = PostgresClient.PoolConfiguration()
        pool.maxConnections = self.poolSize
        return PostgresClient(configuration: postgres, pool: pool, logger: logger)
    }

    /// The standby reads of the server when ``readURL`` is set: a pool of its own on the standby (same size, schema
    /// and application name), measured against `primary`. Run its ``StandbyReads/run()`` as a background task.
    public func makeStandbyReads(primary: PostgresClient, metricsFactory: any MetricsFactory, logger: Logger) throws
        -> StandbyReads?
    {
        guard let readURL = self.readURL else { return nil }
        var standby = self
        standby.url = readURL
        return StandbyReads(
            standby: try standby.makeClient(logger: logger), primary: primary, maxLag: self.readMaxLag,
            pool: self.schema, metricsFactory: metricsFactory, logger: logger)
    }

    /// The server's migrator (its schema, its migrations folder).
    public func migrator() throws -> PostgresMigrator {
        try PostgresMigrator(schema: self.schema, directory: self.migrationsDirectory)
    }

    /// Applies the pending migrations with a pool of its own (closed before returning); returns those applied.
    @discardableResult
    public func migrate(logger: Logger) async throws -> [PostgresMigration] {
        let migrator = try self.migrator()
        var single = self
        single.poolSize = 1
        let client = try single.makeClient(logger: logger)
        do {
            let applied = try await migrator.migrate(on: client, logger: logger)
            await client.shutdown()
            return applied
        } catch {
            await client.shutdown()
            throw error
        }
    }
}
