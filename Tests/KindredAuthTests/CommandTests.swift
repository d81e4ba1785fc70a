import Foundation
import KindredPostgres
import Logging
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The `auth-server` executable: migrate, serve, healthcheck, bootstrap-admin, as an operator runs them.
@Suite("auth-server command")
struct CommandTests {
    /// The executable built next to the test bundle.
    static var executable: String? {
        let exe =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let candidate = URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent("auth-server").path
        return FileManager.default.isExecutableFile(atPath: candidate) ? candidate : nil
    }

    static func run(_ arguments: [String], environment: [String: String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(executable))
        process.arguments = arguments + ["--log-level", "error"].filter { _ in arguments.first != "healthcheck" }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.currentDirectoryURL = TestEnvironment.repositoryRoot
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test(.enabled(if: executable != nil, "auth-server is not built next to the tests"))
    func migrateServeHealthcheckBootstrap() async throws {
        let environment = TestEnvironment.shared
        let started = try await environment.start()
        let url = try await environment.makeEmptyDatabase()
        let dataDirectory = NSTemporaryDirectory() + "kindred-auth-cli-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
        // A free port: bind, read, close.
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(probe, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(probe, $0, &length) }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        close(probe)
        let env = [
            "KINDRED_AUTH_DATABASE_URL": url, "KINDRED_AUTH_LISTEN": "127.0.0.1:\(port)",
            "KINDRED_AUTH_DATA_DIR": dataDirectory, "KINDRED_AUTH_SMTP_PORT": String(started.smtpPort),
            "KINDRED_AUTH_SMTP_SECURITY": "none", "KINDRED_AUTH_ARGON2_MEMORY_KIB": "64",
            "KINDRED_AUTH_ARGON2_ITERATIONS": "1",
        ]
        #expect(try Self.run(["migrate"], environment: env).status == 0)
        #expect(try Self.run(["migrate"], environment: env).status == 0)  // nothing left to apply
        #expect(try Self.run(["healthcheck"], environment: env).status != 0)  // nothing listening yet

        let serve = Process()
        serve.executableURL = URL(fileURLWithPath: try #require(Self.executable))
        serve.arguments = ["serve", "--log-level", "error"]
        serve.environment = ProcessInfo.processInfo.environment.merging(env) { $1 }
        serve.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try serve.run()
        defer { if serve.isRunning { serve.terminate() } }
        var healthy = false
        for _ in 0..<300 where !healthy {
            healthy = try Self.run(["healthcheck"], environment: env).status == 0
            if !healthy { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(healthy)
        #expect(FileManager.default.fileExists(atPath: dataDirectory + "/signing-key.pem"))

        // bootstrap-admin on an account created directly in the database.
        let database = PostgresClient(configuration: try PostgresConfiguration(url), logger: Logger(label: "test"))
        let id = UUID().uuidString.lowercased()
        try await database.execute(
            "INSERT INTO auth.accounts (id, community_id, email, username, status) VALUES (\(id), 'dogs', 'boss@example.com', 'boss', 'active')"
        )
        #expect(try Self.run(["bootstrap-admin", "--email", "Boss@Example.com"], environment: env).status == 0)
        let roles = try await database.query("SELECT roles FROM auth.accounts WHERE id = \(id)").scalar([String].self)
        #expect(roles == ["admin", "user"])
        #expect(try Self.run(["bootstrap-admin", "--email", "nobody@example.com"], environment: env).status != 0)
        await database.shutdown()

        serve.terminate()  // SIGTERM: drains and exits
        serve.waitUntilExit()
        #expect(serve.terminationStatus == 0)
        #expect(try Self.run(["healthcheck"], environment: env).status != 0)
    }
}
