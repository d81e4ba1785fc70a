import Logging

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// One numbered migration: the file `0003_add_photos.sql` is version 3, name `add_photos`.
public struct PostgresMigration: Sendable, Hashable {
    public var version: Int
    public var name: String
    public var sql: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }
}

/// Applies a service's numbered SQL migrations to its schema, forward only.
///
/// Everything happens in ONE transaction: take `pg_advisory_xact_lock(hashtext('kindred.migrations.'
/// || schema))` (so concurrent runs wait for each other), create the schema and
/// `<schema>.schema_migrations(version, name, applied_at)` if missing, compare the recorded versions
/// with the files, apply each new file in version order and record it. A failing file rolls back
/// the whole run. Running it again applies nothing.
///
/// Refused (``PostgresError/Code/migrationFailed``, nothing applied): a recorded version without a
/// file, a recorded version whose file has another name, and a new file numbered below the highest
/// applied version.
///
/// Each file runs as a whole with the simple query protocol (several statements per file; the
/// only place this layer runs SQL text that is not a single parameterised statement, and it comes
/// from the repository, never from users) with `search_path` set to the schema, then `public`, so
/// unqualified names land in the service's schema. Files must not contain BEGIN/COMMIT or
/// statements that cannot run in a transaction (`CREATE INDEX CONCURRENTLY`).
public struct PostgresMigrator: Sendable {
    public let schema: String
    /// The migrations in version order.
    public let migrations: [PostgresMigration]
    /// How long to wait for a concurrent migration run (the advisory lock) or other locks. Default 60 s.
    public var lockTimeout: Duration = .seconds(60)
    /// The per-statement limit while migrating (nil: none). Default none.
    public var statementTimeout: Duration? = nil

    /// Migrations from the `NNNN_name.sql` files in `directory` (other files are ignored).
    public init(schema: String, directory: String) throws {
        try self.init(schema: schema, migrations: try Self.load(directory: directory))
    }

    public init(schema: String, migrations: [PostgresMigration]) throws {
        let sorted = migrations.sorted { $0.version < $1.version }
        for (previous, next) in zip(sorted, sorted.dropFirst()) where previous.version == next.version {
            throw PostgresError(code: .migrationFailed, reason: "two migrations have version \(next.version)")
        }
        if let negative = sorted.first, negative.version < 0 {
            throw PostgresError(code: .migrationFailed, reason: "migration versions must not be negative")
        }
        self.schema = schema
        self.migrations = sorted
    }

    /// Applies the pending migrations.
    /// - Returns: the migrations this run applied (empty when the schema was up to date).
    @discardableResult
    public func migrate(on client: PostgresClient, logger: Logger) async throws -> [PostgresMigration] {
        try await client.withConnection { connection in
            try await connection.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
            do {
                let applied = try await self.migrate(connection, logger: logger)
                try await connection.execute("COMMIT")
                return applied
            } catch {
                _ = await PostgresClient.rollback(connection)
                throw error
            }
        }
    }

    /// The versions and names recorded in `<schema>.schema_migrations` (empty if there is none).
    public func appliedMigrations(on client: PostgresClient) async throws -> [(version: Int, name: String)] {
        let table = quoteIdentifier(self.schema) + ".schema_migrations"
        guard try await client.query("SELECT to_regclass(\(table)) IS NOT NULL").scalar(Bool.self) else {
            return []
        }
        return try await client.query(
            "SELECT version, name FROM \(identifier: self.schema).schema_migrations ORDER BY version"
        ).map { try $0.decode((Int, String).self) }
    }

    private func migrate(_ connection: PostgresConnection, logger: Logger) async throws -> [PostgresMigration] {
        let lockTimeout = Self.milliseconds(self.lockTimeout)
        let statementTimeout = self.statementTimeout.map(Self.milliseconds) ?? "0"
        try await connection.execute("SELECT set_config('lock_timeout', \(lockTimeout), true)")
        try await connection.execute("SELECT set_config('statement_timeout', \(statementTimeout), true)")
        try await connection.execute("SELECT pg_advisory_xact_lock(hashtext(\("kindred.migrations." + self.schema)))")
        // Created only when missing: CREATE SCHEMA IF NOT EXISTS checks the database's CREATE privilege even when
        // the schema exists, and a service role that owns its schema needs no such privilege.
        let exists = try await connection.query("SELECT 1 FROM pg_namespace WHERE nspname = \(self.schema)")
        if exists.isEmpty {
            try await connection.execute("CREATE SCHEMA \(identifier: self.schema)")
        }
        try await connection.execute(
            """
            CREATE TABLE IF NOT EXISTS \(identifier: self.schema).schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """
        )
        let recorded = try await connection.query(
            "SELECT version, name FROM \(identifier: self.schema).schema_migrations ORDER BY version"
        ).map { try $0.decode((Int, String).self) }

        let files = Dictionary(uniqueKeysWithValues: self.migrations.map { ($0.version, $0) })
        for (version, name) in recorded {
            guard let file = files[version] else {
                throw PostgresError(
                    code: .migrationFailed,
                    reason: "version \(version) (\(name)) is applied but its file is missing"
                )
            }
            guard file.name == name else {
                throw PostgresError(
                    code: .migrationFailed,
                    reason: "version \(version) was applied as \"\(name)\" but its file is now \"\(file.name)\""
                )
            }
        }
        let appliedVersions = Set(recorded.map(\.0))
        let pending = self.migrations.filter { !appliedVersions.contains($0.version) }
        if let highest = recorded.last?.0, let first = pending.first, first.version < highest {
            throw PostgresError(
                code: .migrationFailed,
                reason: "version \(first.version) is new but version \(highest) is already applied (forward only)"
            )
        }

        try await connection.execute(
            "SELECT set_config('search_path', \(quoteIdentifier(self.schema) + ", public"), true)"
        )
        for migration in pending {
            logger.info(
                "applying migration",
                metadata: ["db.schema": "\(self.schema)", "db.migration": "\(migration.version)_\(migration.name)"]
            )
            do {
                try await connection.executeScript(migration.sql)
            } catch var error as PostgresError {
                error.reason = "migration \(migration.version) (\(migration.name)) failed: \(error.reason)"
                throw error
            }
            try await connection.execute(
                """
                INSERT INTO \(identifier: self.schema).schema_migrations (version, name) \
                VALUES (\(migration.version), \(migration.name))
                """
            )
        }
        return pending
    }

    // MARK: Files

    static func load(directory: String) throws -> [PostgresMigration] {
        guard let dir = opendir(directory) else {
            throw PostgresError(code: .migrationFailed, reason: "cannot read the migrations directory")
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name.hasSuffix(".sql") { names.append(name) }
        }
        return try names.map { fileName in
            let stem = fileName.dropLast(4)
            guard let underscore = stem.firstIndex(of: "_"),
                let version = Int(stem[..<underscore]),
                stem[..<underscore].allSatisfy(\.isASCII),
                stem.index(after: underscore) < stem.endIndex
            else {
                throw PostgresError(
                    code: .migrationFailed,
                    reason: "migration file \(fileName) is not named NNNN_description.sql"
                )
            }
            let sql = try readFile(directory + "/" + fileName)
            return PostgresMigration(version: version, name: String(stem[stem.index(after: underscore)...]), sql: sql)
        }
    }

    private static func readFile(_ path: String) throws -> String {
        guard let file = fopen(path, "rb") else {
            throw PostgresError(code: .migrationFailed, reason: "cannot read a migration file")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            bytes += chunk[..<count]
            if count < chunk.count { break }
        }
        guard ferror(file) == 0 else {
            throw PostgresError(code: .migrationFailed, reason: "cannot read a migration file")
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return String(seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }
}
