import Foundation
import KindredPostgres
import KindredPostgresTesting
import Logging
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A child process (the SMTP sink) that exits when its stdin closes, that is when this test process ends.
final class ChildProcess: @unchecked Sendable {
    let process = Process()
    let input = Pipe()
    let output = Pipe()

    init(_ arguments: [String]) throws {
        self.process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        self.process.arguments = arguments
        self.process.standardInput = self.input
        self.process.standardOutput = self.output
        self.process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try self.process.run()
    }
}

/// The test run's PostgreSQL (`TestPostgres.shared()`) and one SMTP sink for the whole test run; each test gets
/// its own database cloned from a migrated template.
actor TestEnvironment {
    static let shared = TestEnvironment()

    struct Started {
        var postgres: TestPostgres
        var smtpPort: Int
        var mailDirectory: String
    }

    private var started: Task<Started, any Error>?
    let logger = Logger(label: "kindred.auth.tests")

    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let migrations = repositoryRoot.appendingPathComponent("services/auth/migrations").path

    func start() async throws -> Started {
        if let started { return try await started.value }
        let task = Task { try await Self.launch() }
        self.started = task
        return try await task.value
    }

    /// A fresh database with the auth schema migrated; returns its URL.
    func makeDatabase() async throws -> String {
        try await self.start().postgres.createMigratedDatabase(schema: "auth", migrations: Self.migrations)
    }

    /// An empty database (for `auth-server migrate`); returns its URL.
    func makeEmptyDatabase() async throws -> String {
        let postgres = try await self.start().postgres
        let name = "auth_empty_" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        _ = try await postgres.createDatabase(name)
        return postgres.url(database: name)
    }

    private static func launch() async throws -> Started {
        let postgres = try await TestPostgres.shared()
        // Inside the server's folder, which is deleted when the test process ends.
        let mailDirectory = postgres.directory + "/auth-mail"
        // The SMTP sink of the KindredSMTP tests (aiosmtpd), reused by path.
        try FileManager.default.createDirectory(atPath: mailDirectory, withIntermediateDirectories: true)
        let script = repositoryRoot.appendingPathComponent("Tests/KindredSMTPTests/python/smtp_sink.py").path
        let sink = try ChildProcess(["python3", script, mailDirectory, "--tempfail-rcpt", "greylisted@example.com"])
        keepAlive.append(sink)
        let line = sink.output.fileHandleForReading.readLine()
        guard let line, line.hasPrefix("LISTENING "), let smtpPort = Int(line.dropFirst("LISTENING ".count)) else {
            throw TestSetupError(message: "smtp_sink.py did not start (is aiosmtpd installed?)")
        }
        return Started(postgres: postgres, smtpPort: smtpPort, mailDirectory: mailDirectory)
    }

    nonisolated(unsafe) private static var keepAlive: [ChildProcess] = []
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
