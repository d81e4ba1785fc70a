import Foundation
import KindredPostgres
import Logging
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A child process that stops when this test process ends.
final class ChildProcess: @unchecked Sendable {
    let process = Process()
    let input = Pipe()
    let output = Pipe()

    /// `direct`: the program itself exits when its stdin closes. Otherwise a shell waits for this process to
    /// end, stops the program with `stopSignal` and removes `cleanup`.
    init(_ arguments: [String], direct: Bool = false, stopSignal: String = "TERM", cleanup: String? = nil) throws {
        if direct {
            self.process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            self.process.arguments = arguments
        } else {
            // Polls for this test process instead of waiting for stdin to close: the shell inherits the
            // pipe's write end, so EOF would never come.
            let remove = cleanup.map { "; rm -rf '\($0)'" } ?? ""
            let script =
                "\"$@\" </dev/null & child=$!; while kill -0 \(getpid()) 2>/dev/null && kill -0 $child 2>/dev/null; do sleep 0.5; done; "
                + "kill -\(stopSignal) $child 2>/dev/null; wait $child\(remove)"
            self.process.executableURL = URL(fileURLWithPath: "/bin/sh")
            self.process.arguments = ["-c", script, "sh"] + arguments
        }
        self.process.standardInput = self.input
        self.process.standardOutput = self.output
        self.process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try self.process.run()
    }

    func stop() {
        try? self.input.fileHandleForWriting.close()
        // Also SIGKILL: another child may have inherited the stdin pipe, so EOF alone may never come, and
        // Foundation starts children with SIGTERM blocked.
        if self.process.isRunning { kill(self.process.processIdentifier, SIGKILL) }
        self.process.waitUntilExit()
    }
}

/// One PostgreSQL server and one SMTP sink for the whole test run; each test gets its own database cloned
/// from a migrated template.
actor TestEnvironment {
    static let shared = TestEnvironment()

    struct Started {
        var socketDirectory: String
        var port: Int
        var smtpPort: Int
        var mailDirectory: String
    }

    private var started: Task<Started, any Error>?
    private var databaseCounter = 0
    let logger = Logger(label: "kindred.auth.tests")

    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    func start() async throws -> Started {
        if let started { return try await started.value }
        let task = Task { try await Self.launch(logger: self.logger) }
        self.started = task
        return try await task.value
    }

    /// A fresh database with the auth schema migrated; returns its URL.
    func makeDatabase() async throws -> String {
        let started = try await self.start()
        self.databaseCounter += 1
        let name = "auth_test_\(self.databaseCounter)"
        // No statement timeout: dozens of tests clone the template at once, which can take longer than the default
        // 5 s on a loaded machine.
        var configuration = try PostgresConfiguration(Self.url(started, database: "postgres"))
        configuration.statementTimeout = nil
        let admin = PostgresClient(configuration: configuration, logger: self.logger)
        defer { Task { await admin.shutdown() } }
        try await admin.execute(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name) TEMPLATE auth_template"))
        await admin.shutdown()
        return Self.url(started, database: name)
    }

    /// An empty database (for `auth-server migrate`); returns its URL.
    func makeEmptyDatabase() async throws -> String {
        let started = try await self.start()
        self.databaseCounter += 1
        let name = "auth_empty_\(self.databaseCounter)"
        var configuration = try PostgresConfiguration(Self.url(started, database: "postgres"))
        configuration.statementTimeout = nil  // as in makeDatabase: CREATE DATABASE can be slow under load
        let admin = PostgresClient(configuration: configuration, logger: self.logger)
        try await admin.execute(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        await admin.shutdown()
        return Self.url(started, database: name)
    }

    static func url(_ started: Started, database: String) -> String {
        "postgresql://postgres@/\(database)?host=\(started.socketDirectory)&port=\(started.port)"
    }

    private static func launch(logger: Logger) async throws -> Started {
        let bin = "/usr/lib/postgresql/15/bin"
        let directory = NSTemporaryDirectory() + "kindred-auth-tests-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let data = directory + "/data"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let asRoot = getuid() == 0
        if asRoot { try run(["/bin/chown", "postgres:postgres", directory]) }
        // setpriv execs the program itself (runuser would stay as a parent that does not pass SIGINT on).
        let prefix = asRoot ? ["/usr/bin/setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"] : []
        try run(prefix + ["\(bin)/initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"])
        let port = Int.random(in: 20_000...60_000)
        let postgres = try ChildProcess(
            prefix + [
                "\(bin)/postgres", "-D", data, "-k", directory, "-p", String(port), "-c", "listen_addresses=",
                "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c",
                "max_connections=400",
            ],
            stopSignal: "INT",
            cleanup: directory
        )
        keepAlive.append(postgres)
        var started = Started(socketDirectory: directory, port: port, smtpPort: 0, mailDirectory: directory + "/mail")
        // Wait for the server, then build the migrated template.
        let admin = PostgresClient(
            configuration: try PostgresConfiguration(url(started, database: "postgres")),
            logger: logger
        )
        var ready = false
        for _ in 0..<300 {
            if (try? await admin.query("SELECT 1")) != nil { ready = true; break }
            try await Task.sleep(for: .milliseconds(100))
        }
        guard ready else { throw TestSetupError(message: "PostgreSQL did not start") }
        try await admin.execute("CREATE DATABASE auth_template")
        await admin.shutdown()
        let template = PostgresClient(
            configuration: try PostgresConfiguration(url(started, database: "auth_template")),
            logger: logger
        )
        try await PostgresMigrator(
            schema: "auth",
            directory: repositoryRoot.appendingPathComponent("services/auth/migrations").path
        ).migrate(on: template, logger: logger)
        await template.shutdown()

        // The SMTP sink of the KindredSMTP tests (aiosmtpd), reused by path.
        try FileManager.default.createDirectory(atPath: started.mailDirectory, withIntermediateDirectories: true)
        let script = repositoryRoot.appendingPathComponent("Tests/KindredSMTPTests/python/smtp_sink.py").path
        let sink = try ChildProcess(
            ["python3", script, started.mailDirectory, "--tempfail-rcpt", "greylisted@example.com"],
            direct: true
        )
        keepAlive.append(sink)
        let line = sink.output.fileHandleForReading.readLine()
        guard let line, line.hasPrefix("LISTENING "), let smtpPort = Int(line.dropFirst("LISTENING ".count)) else {
            throw TestSetupError(message: "smtp_sink.py did not start (is aiosmtpd installed?)")
        }
        started.smtpPort = smtpPort
        return started
    }

    nonisolated(unsafe) private static var keepAlive: [ChildProcess] = []

    private static func run(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestSetupError(message: "\(arguments[0]) exited with \(process.terminationStatus)")
        }
    }
}

struct TestSetupError: Error, CustomStringConvertible {
    var message: String
    var description: String { self.message }
}

extension FileHandle {
    /// Reads one line byte by byte (the sink prints one line, then nothing).
    func readLine() -> String? {
        var bytes: [UInt8] = []
        while true {
            let chunk = self.readData(ofLength: 1)
            guard let byte = chunk.first else { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
    }
}

/// Mail captured by the sink.
struct CapturedMail {
    var recipients: [String]
    var subject: String
    var text: String
    var messageID: String

    /// The `token=` value of the first link in the text.
    var token: String? {
        guard let range = self.text.range(of: "token=") else { return nil }
        return String(self.text[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
    }

    /// The six-digit code after "code in the app: ".
    var code: String? {
        guard let range = self.text.range(of: "code in the app: ") else { return nil }
        return String(self.text[range.upperBound...].prefix(6))
    }
}

enum Mailbox {
    static func all(in directory: String) -> [CapturedMail] {
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasPrefix("message-") }.sorted()
        return files.compactMap { name in
            guard let data = FileManager.default.contents(atPath: directory + "/" + name),
                let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                let parsed = json["parsed"] as? [String: Any]
            else { return nil }
            return CapturedMail(
                recipients: json["rcpt_tos"] as? [String] ?? [],
                subject: parsed["subject"] as? String ?? "",
                text: parsed["text"] as? String ?? "",
                messageID: parsed["message_id"] as? String ?? ""
            )
        }
    }

    /// Waits (up to 30 s, for loaded CI machines) until `count` mails to `address` arrived; returns them in order.
    static func wait(for address: String, count: Int = 1, in directory: String) async throws -> [CapturedMail] {
        for _ in 0..<600 {
            let mails = all(in: directory).filter { $0.recipients.contains(address) }
            if mails.count >= count { return mails }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestSetupError(message: "no mail for the address arrived")
    }
}
