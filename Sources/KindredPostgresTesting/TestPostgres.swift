import Foundation
import KindredPostgres
import KindredTestSupport
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A private PostgreSQL server for tests: `initdb` into a temporary folder, listening only on a unix
/// socket in that folder.
///
/// ```swift
/// let postgres = try await TestPostgres.shared()          // started once per test process
/// let configuration = try await postgres.createDatabase() // a fresh database per test
/// let client = PostgresClient(configuration: configuration, logger: logger)
/// defer { Task { await client.shutdown() } }
/// ```
///
/// As root, `initdb` and `postgres` run as the `postgres` system user (`runuser`), which owns the
/// folder; otherwise as the current user. The server runs with `fsync=off` and
/// `full_page_writes=off`: fast, and not crash-safe, which tests do not need.
///
/// The server never outlives the test process: it is started by a small shell wrapper that shuts
/// it down (SIGINT, PostgreSQL's fast shutdown, as `pg_ctl stop -m fast` sends) as soon as the
/// test process is gone, however it ended, and then deletes the folder. ``shared()`` also stops the
/// server from an `atexit` handler, so a normal exit waits for a clean shutdown.
public final class TestPostgres: Sendable {
    /// The temporary folder: data directory, socket and logs. Deleted by ``stop()``.
    public let directory: String
    /// Where the server's socket (`.s.PGSQL.5432`) is.
    public var socketDirectory: String { self.directory }
    /// The superuser `initdb` created (trust authentication).
    public let user = "kindred"
    /// The port number in the socket's name.
    public let port = 5432
    private let wrapperPID: pid_t
    private let logger: Logger
    private let stopped = Mutex(false)
    /// Migrated template databases by schema and migrations folder, each built once.
    private let templates = Mutex([String: Task<String, any Error>]())

    private init(directory: String, wrapperPID: pid_t, logger: Logger) {
        self.directory = directory
        self.wrapperPID = wrapperPID
        self.logger = logger
    }

    /// `postgresql://kindred@/postgres?host=<directory>`.
    public var url: String {
        "postgresql://\(self.user)@/postgres?host=\(self.directory)&port=\(self.port)"
    }

    /// A configuration for `database` on this server.
    public func configuration(database: String = "postgres") -> PostgresConfiguration {
        PostgresConfiguration(host: self.directory, port: self.port, user: self.user, database: database)
    }

    /// Creates a database (a random `test_…` name when `name` is nil) and returns its configuration.
    public func createDatabase(_ name: String? = nil) async throws -> PostgresConfiguration {
        let name = name ?? "test_" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        try await self.execute("CREATE DATABASE \(identifier: name)")
        return self.configuration(database: name)
    }

    /// Runs one statement on the `postgres` database without a statement timeout: CREATE DATABASE copies its
    /// template, which can take seconds on a loaded machine.
    private func execute(_ query: PostgresQuery) async throws {
        var configuration = self.configuration()
        configuration.statementTimeout = nil
        let connection = try await PostgresConnection.connect(configuration: configuration, logger: self.logger)
        defer { connection.close() }
        try await connection.execute(query)
    }

    /// A libpq URL for `database` on this server.
    public func url(database: String) -> String {
        "postgresql://\(self.user)@/\(database)?host=\(self.directory)&port=\(self.port)"
    }

    /// A fresh database with a service's migrations applied; returns its URL. The migrations run once per
    /// (schema, folder) into a template database; each call then clones the template (`CREATE DATABASE ...
    /// TEMPLATE`), which takes milliseconds, so every test can have its own migrated database.
    public func createMigratedDatabase(schema: String, migrations directory: String) async throws -> String {
        let key = schema + "\u{0}" + directory
        let task = self.templates.withLock { templates in
            if let task = templates[key] { return task }
            let name = "template_\(schema)_" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            let task = Task { () throws -> String in
                let configuration = try await self.createDatabase(name)
                let client = PostgresClient(configuration: configuration, logger: self.logger)
                do {
                    _ = try await PostgresMigrator(schema: schema, directory: directory).migrate(on: client, logger: self.logger)
                    await client.shutdown()
                } catch {
                    await client.shutdown()
                    throw error
                }
                return name
            }
            templates[key] = task
            return task
        }
        let template = try await task.value
        let name = "test_\(schema)_" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        try await self.execute("CREATE DATABASE \(identifier: name) TEMPLATE \(identifier: template)")
        return self.url(database: name)
    }

    // MARK: Starting

    /// The server shared by the whole test process: started on first use, stopped at exit.
    public static func shared() async throws -> TestPostgres {
        let task = sharedServer.withLock { server in
            if let task = server { return task }
            let task = Task { () throws -> TestPostgres in
                let postgres = try await TestPostgres.start()
                exitHook.withLock { $0 = (postgres.directory, postgres.wrapperPID) }
                atexit { stopSharedServerAtExit() }
                return postgres
            }
            server = task
            return task
        }
        return try await task.value
    }

    /// Starts a new server. Call ``stop()`` when done (or rely on the wrapper at process exit).
    public static func start(
        logger: Logger = Logger(label: "kindred.test-postgres", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws -> TestPostgres {
        let binaries = try findServerBinaries()
        let runAs = try serverUser()
        removeStaleFolders()
        var template = Array("/tmp/kindred-pg-XXXXXX".utf8CString)
        guard mkdtemp(&template) != nil else { throw TestPostgresError("cannot create a temporary folder") }
        let directory = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let dataDirectory = directory + "/data"
        let logFile = directory + "/postgres.log"
        _ = FileManager.default.createFile(atPath: logFile, contents: nil)
        // Lets a later run remove the folder if this process dies before the server starts.
        _ = FileManager.default.createFile(atPath: directory + "/owner", contents: Data(String(getpid()).utf8))
        if let runAs {
            guard chown(directory, runAs.uid, runAs.gid) == 0, chown(logFile, runAs.uid, runAs.gid) == 0 else {
                throw TestPostgresError("cannot hand \(directory) to the postgres user")
            }
        }

        let initdb = try spawnShell(
            "exec \"$@\"",
            [
                binaries.initdb, "-D", dataDirectory, "-A", "trust", "-U", "kindred", "--no-sync", "-E", "UTF8",
                "--locale=C",
            ],
            asUser: runAs?.name,
            log: logFile
        )
        var initdbStatus = exitStatus(initdb)
        while initdbStatus == nil {
            try await Task.sleep(for: .milliseconds(10))
            initdbStatus = exitStatus(initdb)
        }
        guard initdbStatus == 0 else {
            throw TestPostgresError("initdb failed (exit \(initdbStatus ?? -1)):\n\(logTail(logFile))")
        }

        // The wrapper starts postgres, stops it (SIGINT = fast shutdown) once the test process is
        // gone, and removes the folder after postgres exits. One server serves every suite of the test process
        // at once (each test server's pool, listeners and relays): a parallel run's peak reached the former limit
        // of 400 backends, and each refused connection failed a test that had nothing to do with it.
        let wrapper = """
            "$1" -D "$2" -k "$3" -p 5432 -c listen_addresses= -c fsync=off -c full_page_writes=off \\
                -c max_connections=1000 -c deadlock_timeout=200ms &
            pg=$!
            (
                while kill -0 "$pg" 2>/dev/null; do
                    if [ ! -d "/proc/$4" ]; then kill -INT "$pg"; exit 0; fi
                    sleep 0.5
                done
            ) </dev/null >/dev/null 2>&1 &
            wait "$pg"
            rm -rf "$3"
            """
        let wrapperPID = try spawnShell(
            wrapper,
            [binaries.postgres, dataDirectory, directory, String(getpid())],
            asUser: runAs?.name,
            log: logFile
        )

        let postgres = TestPostgres(directory: directory, wrapperPID: wrapperPID, logger: logger)
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            do {
                var configuration = postgres.configuration()
                configuration.connectTimeout = .seconds(2)
                let connection = try await PostgresConnection.connect(configuration: configuration, logger: logger)
                connection.close()
                return postgres
            } catch {
                if exitStatus(wrapperPID) != nil {
                    throw TestPostgresError("postgres exited during startup:\n\(logTail(logFile))")
                }
                if ContinuousClock.now > deadline {
                    try? await postgres.stop()
                    throw TestPostgresError("postgres did not accept connections within 30 s:\n\(logTail(logFile))")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    // MARK: Stopping

    /// Stops the server (fast shutdown: open sessions are ended) and deletes its folder.
    public func stop() async throws {
        let alreadyStopped = self.stopped.withLock { stopped in
            defer { stopped = true }
            return stopped
        }
        guard !alreadyStopped else { return }
        if let pid = postmasterPID(self.directory) {
            kill(pid, SIGINT)
        }
        // The wrapper deletes the folder once postgres has exited, then ends.
        let deadline = ContinuousClock.now + .seconds(15)
        while exitStatus(self.wrapperPID) == nil && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        try? FileManager.default.removeItem(atPath: self.directory)
    }
}

/// The test server could not be set up.
public struct TestPostgresError: Error, CustomStringConvertible {
    public var description: String

    init(_ description: String) {
        self.description = description
    }
}

// MARK: - Process-wide state

private let sharedServer = Mutex<Task<TestPostgres, any Error>?>(nil)
private let exitHook = Mutex<(directory: String, wrapperPID: pid_t)?>(nil)

/// Runs at process exit: stop the shared server and wait (bounded) for it to go.
private func stopSharedServerAtExit() {
    guard let (directory, wrapperPID) = exitHook.withLock({ $0 }) else { return }
    if let pid = postmasterPID(directory) {
        kill(pid, SIGINT)
    }
    // Up to 10 s for the fast shutdown and the wrapper's cleanup.
    for _ in 0..<1000 where exitStatus(wrapperPID) == nil {
        usleep(10_000)
    }
}

/// Removes folders of earlier runs whose test process is gone and whose server is not running
/// (a run killed between `initdb` and the server start leaves its folder behind).
private func removeStaleFolders() {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/tmp") else { return }
    for name in names where name.hasPrefix("kindred-pg-") {
        let directory = "/tmp/" + name
        guard let owner = try? String(contentsOfFile: directory + "/owner", encoding: .utf8),
            let ownerPID = pid_t(owner.trimmingCharacters(in: .whitespacesAndNewlines)),
            !FileManager.default.fileExists(atPath: "/proc/\(ownerPID)")
        else { continue }
        if let server = postmasterPID(directory), kill(server, 0) == 0 { continue }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

private func postmasterPID(_ directory: String) -> pid_t? {
    guard let contents = try? String(contentsOfFile: directory + "/data/postmaster.pid", encoding: .utf8),
        let firstLine = contents.split(separator: "\n").first
    else { return nil }
    return pid_t(firstLine.trimmingCharacters(in: .whitespaces))
}

// MARK: - Binaries and users

private struct ServerBinaries {
    var initdb: String
    var postgres: String
}

/// `initdb` and `postgres` from the highest `/usr/lib/postgresql/<version>/bin`, else from PATH.
private func findServerBinaries() throws -> ServerBinaries {
    var candidates: [String] = []
    if let versions = try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql") {
        for version in versions.sorted(by: { (Double($0) ?? 0) > (Double($1) ?? 0) }) {
            candidates.append("/usr/lib/postgresql/\(version)/bin")
        }
    }
    candidates += (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
    for directory in candidates {
        let initdb = directory + "/initdb"
        let postgres = directory + "/postgres"
        if FileManager.default.isExecutableFile(atPath: initdb)
            && FileManager.default.isExecutableFile(atPath: postgres)
        {
            return ServerBinaries(initdb: initdb, postgres: postgres)
        }
    }
    throw TestPostgresError(
        "PostgreSQL server binaries (initdb, postgres) not found in /usr/lib/postgresql/*/bin or PATH: "
            + "install the Debian package postgresql"
    )
}

private struct ServerUser {
    var name: String
    var uid: uid_t
    var gid: gid_t
}

/// PostgreSQL refuses to run as root: as root, use the `postgres` system user.
private func serverUser() throws -> ServerUser? {
    guard geteuid() == 0 else { return nil }
    guard let entry = getpwnam("postgres") else {
        throw TestPostgresError(
            "running as root, but there is no postgres user to run the server as: install the Debian package postgresql"
        )
    }
    guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser") else {
        throw TestPostgresError("running as root, but /usr/sbin/runuser (util-linux) is missing")
    }
    return ServerUser(name: "postgres", uid: entry.pointee.pw_uid, gid: entry.pointee.pw_gid)
}

// MARK: - Processes

/// Runs `command` through `/bin/sh -c` (as `user` when set), output appended to `log`, with a clean
/// signal mask.
///
/// Not Foundation's `Process`: its children start with most signals blocked, and a shell with
/// SIGCHLD blocked never returns from `wait`, which the server wrapper relies on.
private func spawnShell(_ script: String, _ arguments: [String], asUser user: String?, log: String) throws -> pid_t {
    // The shell first closes every descriptor above 2 (see `TestProcessShell`).
    let closeInherited = TestProcessShell.closeInheritedDescriptors
    let shell = ["/bin/bash", "-c", closeInherited + "LC_ALL=C; export LC_ALL; exec >>\"$0\" 2>&1; " + script, log] + arguments
    // runuser stays alive as the server's parent, so it must not inherit descriptors either: a first shell
    // closes them and then becomes runuser (seen: runuser holding another test's stdin pipe hung that test).
    let argv =
        user.map { ["/bin/bash", "-c", closeInherited + "exec \"$@\"", "bash", "/usr/sbin/runuser", "-u", $0, "--"] + shell }
        ?? shell

    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var noSignals = sigset_t()
    sigemptyset(&noSignals)
    var allSignals = sigset_t()
    sigfillset(&allSignals)
    posix_spawnattr_setsigmask(&attributes, &noSignals)
    posix_spawnattr_setsigdefault(&attributes, &allSignals)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    let cArguments = argv.map { strdup($0) } + [nil]
    defer { for argument in cArguments { free(argument) } }
    var pid = pid_t()
    // Returns 0 or an errno value (ENOENT, EACCES, ...).
    let rc = posix_spawn(&pid, argv[0], &actions, &attributes, cArguments, environ)
    guard rc == 0 else {
        throw TestPostgresError("cannot start \(argv[0]): \(String(cString: strerror(rc)))")
    }
    return pid
}

/// Reaps `pid` if it has exited. - Returns: its exit code, or nil while it runs.
private func exitStatus(_ pid: pid_t) -> Int32? {
    var status: Int32 = 0
    switch waitpid(pid, &status, WNOHANG) {
    case pid:
        // WIFEXITED / WEXITSTATUS (macros that do not import): low 7 bits are the terminating signal.
        return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    case -1:
        return errno == ECHILD ? -1 : nil
    default:
        return nil
    }
}

private func logTail(_ path: String) -> String {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return "(no log)" }
    return text.split(separator: "\n").suffix(20).joined(separator: "\n")
}
