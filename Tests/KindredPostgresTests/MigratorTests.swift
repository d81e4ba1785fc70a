import Foundation
import KindredPostgres
import Testing

@Suite struct MigratorTests {
    private static let createProfiles = """
        CREATE TABLE profiles (user_id bigint PRIMARY KEY, name text NOT NULL);
        -- Several statements in one file, unqualified names land in the service schema.
        CREATE INDEX profiles_name ON profiles (name);
        """

    @Test func appliesOnceRecordsVersionsAndIsIdempotent() async throws {
        try await withTestClient { client in
            try await withMigrationDirectory([
                "0001_create_profiles.sql": Self.createProfiles,
                "0002_add_bio.sql": "ALTER TABLE profiles ADD COLUMN bio text;",
                "README.md": "not a migration",
            ]) { directory in
                let migrator = try PostgresMigrator(schema: "profile", directory: directory)
                #expect(migrator.migrations.map(\.version) == [1, 2])

                let first = try await migrator.migrate(on: client, logger: testLogger)
                #expect(first.map(\.name) == ["create_profiles", "add_bio"])
                let second = try await migrator.migrate(on: client, logger: testLogger)
                #expect(second.isEmpty)

                let applied = try await migrator.appliedMigrations(on: client)
                #expect(applied.map(\.version) == [1, 2])
                #expect(applied.map(\.name) == ["create_profiles", "add_bio"])
                try await client.execute("INSERT INTO profile.profiles (user_id, name, bio) VALUES (1, 'a', 'b')")
                let inPublic = try await client.query("SELECT to_regclass('public.profiles') IS NULL").scalar(Bool.self)
                #expect(inPublic)

                // A new file later is applied on the next run.
                try "CREATE TABLE photos (id bigint);".write(
                    toFile: directory + "/0003_photos.sql",
                    atomically: true,
                    encoding: .utf8
                )
                let third = try await PostgresMigrator(schema: "profile", directory: directory)
                    .migrate(on: client, logger: testLogger)
                #expect(third.map(\.version) == [3])
            }
        }
    }

    @Test func refusesARenamedOrMissingAppliedFile() async throws {
        try await withTestClient { client in
            let original = try PostgresMigrator(
                schema: "match",
                migrations: [
                    PostgresMigration(version: 1, name: "create_swipes", sql: "CREATE TABLE swipes (a int);"),
                    PostgresMigration(version: 2, name: "add_index", sql: "CREATE INDEX swipes_a ON swipes (a);"),
                ]
            )
            try await original.migrate(on: client, logger: testLogger)

            let renamed = try PostgresMigrator(
                schema: "match",
                migrations: [
                    PostgresMigration(version: 1, name: "create_swipes", sql: "CREATE TABLE swipes (a int);"),
                    PostgresMigration(version: 2, name: "add_idx", sql: "CREATE INDEX swipes_a ON swipes (a);"),
                    PostgresMigration(version: 3, name: "more", sql: "CREATE TABLE more (a int);"),
                ]
            )
            let renameError = await #expect(throws: PostgresError.self) {
                try await renamed.migrate(on: client, logger: testLogger)
            }
            #expect(renameError?.code == .migrationFailed)

            let missing = try PostgresMigrator(
                schema: "match",
                migrations: [PostgresMigration(version: 1, name: "create_swipes", sql: "CREATE TABLE swipes (a int);")]
            )
            let missingError = await #expect(throws: PostgresError.self) {
                try await missing.migrate(on: client, logger: testLogger)
            }
            #expect(missingError?.code == .migrationFailed)

            let outOfOrder = try PostgresMigrator(
                schema: "match",
                migrations: original.migrations + [PostgresMigration(version: 0, name: "late", sql: "SELECT 1;")]
            )
            await #expect(throws: PostgresError.self) { try await outOfOrder.migrate(on: client, logger: testLogger) }

            // Nothing of the refused runs was applied.
            #expect(try await client.query("SELECT to_regclass('match.more') IS NULL").scalar(Bool.self))
            #expect(try await original.appliedMigrations(on: client).map(\.version) == [1, 2])
        }
    }

    @Test func aFailingMigrationRollsBackTheWholeRun() async throws {
        try await withTestClient { client in
            let migrator = try PostgresMigrator(
                schema: "chat",
                migrations: [
                    PostgresMigration(version: 1, name: "threads", sql: "CREATE TABLE threads (id int);"),
                    PostgresMigration(
                        version: 2,
                        name: "broken",
                        sql: "CREATE TABLE messages (id int); INSERT INTO nowhere VALUES (1);"
                    ),
                ]
            )
            let error = await #expect(throws: PostgresError.self) {
                try await migrator.migrate(on: client, logger: testLogger)
            }
            #expect(error?.sqlState == "42P01")
            #expect(error?.reason.contains("migration 2 (broken)") == true)
            #expect(try await client.query("SELECT to_regclass('chat.threads') IS NULL").scalar(Bool.self))
            #expect(try await migrator.appliedMigrations(on: client).isEmpty)
        }
    }

    @Test func concurrentMigratorsApplyEachVersionOnce() async throws {
        var pool = PostgresClient.PoolConfiguration()
        pool.maxConnections = 4
        try await withTestClient(pool: pool) { client in
            let migrator = try PostgresMigrator(
                schema: "auth",
                migrations: [
                    // Slow enough that the runs overlap; without the lock the second CREATE TABLE fails.
                    PostgresMigration(
                        version: 1,
                        name: "accounts",
                        sql: "SELECT pg_sleep(0.3); CREATE TABLE accounts (id bigint PRIMARY KEY);"
                    ),
                    PostgresMigration(version: 2, name: "sessions", sql: "CREATE TABLE sessions (id bigint);"),
                ]
            )
            let applied = try await withThrowingTaskGroup(of: [Int].self) { group in
                for _ in 0..<3 {
                    group.addTask { try await migrator.migrate(on: client, logger: testLogger).map(\.version) }
                }
                var runs: [[Int]] = []
                for try await run in group { runs.append(run) }
                return runs
            }
            #expect(applied.sorted { $0.count > $1.count } == [[1, 2], [], []])
            let count = try await client.query("SELECT count(*) FROM auth.schema_migrations").scalar(Int.self)
            #expect(count == 2)
        }
    }

    @Test func badFileNamesAndDuplicateVersionsAreRefused() throws {
        try withMigrationDirectorySync(["01-initial.sql": "SELECT 1;"]) { directory in
            #expect(throws: PostgresError.self) { _ = try PostgresMigrator(schema: "x", directory: directory) }
        }
        #expect(throws: PostgresError.self) {
            _ = try PostgresMigrator(
                schema: "x",
                migrations: [
                    PostgresMigration(version: 1, name: "a", sql: ""),
                    PostgresMigration(version: 1, name: "b", sql: ""),
                ]
            )
        }
    }
}

private func withMigrationDirectory<T>(
    _ files: [String: String],
    _ body: (String) async throws -> T
) async throws -> T {
    let directory =
        NSTemporaryDirectory() + "kindred-migrations-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    for (name, contents) in files {
        try contents.write(toFile: directory + "/" + name, atomically: true, encoding: .utf8)
    }
    return try await body(directory)
}

private func withMigrationDirectorySync(_ files: [String: String], _ body: (String) throws -> Void) throws {
    let directory =
        NSTemporaryDirectory() + "kindred-migrations-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    for (name, contents) in files {
        try contents.write(toFile: directory + "/" + name, atomically: true, encoding: .utf8)
    }
    try body(directory)
}
