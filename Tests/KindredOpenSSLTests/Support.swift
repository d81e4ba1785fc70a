import Foundation

/// Runs a command to completion and returns its exit status and combined output.
///
/// Input and output go through temporary files, not pipes: a long-lived child started meanwhile by another
/// test (PostgreSQL's runuser, an SMTP sink) can inherit a pipe's write end, and then EOF never comes. A
/// command still running after 60 s is killed (SIGKILL: Foundation starts children with most signals blocked,
/// so `timeout`'s own alarm may never fire).
@discardableResult
func run(_ arguments: [String], input: [UInt8]? = nil, in directory: String? = nil) throws -> (
    status: Int32, output: String
) {
    let scratch = NSTemporaryDirectory() + "kindred-run-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: scratch) }
    let inputPath = scratch + "/input"
    let outputPath = scratch + "/output"
    FileManager.default.createFile(atPath: inputPath, contents: Data(input ?? []))
    FileManager.default.createFile(atPath: outputPath, contents: nil)

    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    let inputHandle = try FileHandle(forReadingFrom: URL(fileURLWithPath: inputPath))
    let outputHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
    process.standardInput = inputHandle
    process.standardOutput = outputHandle
    process.standardError = outputHandle
    try process.run()
    try? inputHandle.close()
    try? outputHandle.close()
    let deadline = Date().addingTimeInterval(60)
    while process.isRunning && Date() < deadline { usleep(20_000) }
    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
    let data = FileManager.default.contents(atPath: outputPath) ?? Data()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// Like ``run(_:input:in:)`` but throws when the command fails.
@discardableResult
func runChecked(_ arguments: [String], input: [UInt8]? = nil, in directory: String? = nil) throws -> String {
    let (status, output) = try run(arguments, input: input, in: directory)
    guard status == 0 else { throw CommandFailed(command: arguments.joined(separator: " "), output: output) }
    return output
}

struct CommandFailed: Error, CustomStringConvertible {
    var command: String
    var output: String
    var description: String { "command failed: \(self.command)\n\(self.output)" }
}

func makeTemporaryDirectory() throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("kindred-openssl-\(UUID().uuidString)")
        .path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

func hex(_ text: String) -> [UInt8] {
    let digits = Array(text.utf8)
    return stride(from: 0, to: digits.count, by: 2).map {
        UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)!
    }
}

/// A throwaway PKI made with the `openssl` CLI once per test run: a CA with a server certificate
/// (localhost, 127.0.0.1) and a client certificate, and an unrelated CA with its own server certificate.
struct TestPKI: Sendable {
    let directory: String

    var caCertificate: String { self.directory + "/ca.pem" }
    var serverCertificate: String { self.directory + "/server.pem" }
    var serverKey: String { self.directory + "/server.key" }
    var clientCertificate: String { self.directory + "/client.pem" }
    var clientKey: String { self.directory + "/client.key" }
    var otherCACertificate: String { self.directory + "/other-ca.pem" }
    var otherServerCertificate: String { self.directory + "/other-server.pem" }
    var otherServerKey: String { self.directory + "/other-server.key" }

    private static let shared = Result { try TestPKI.generate() }

    static func get() throws -> TestPKI { try Self.shared.get() }

    private static func generate() throws -> TestPKI {
        let directory = try makeTemporaryDirectory()
        func openssl(_ arguments: String...) throws { try runChecked(["openssl"] + arguments, in: directory) }
        func write(_ name: String, _ text: String) throws {
            try text.write(toFile: directory + "/" + name, atomically: true, encoding: .utf8)
        }
        for ca in ["ca", "other-ca"] {
            try openssl(
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                "\(ca).key",
                "-out",
                "\(ca).pem",
                "-days",
                "2",
                "-subj",
                "/CN=Kindred Test \(ca)",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign"
            )
        }
        try write("server.ext", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
        try write("client.ext", "extendedKeyUsage=clientAuth\n")
        // The server key is RSA and the client key EC, so both key types go through the handshake.
        let leaves = [
            ("server", "ca", "/CN=localhost", "server.ext", ["rsa:2048"]),
            (
                "client", "ca", "/CN=kindred-test-client/O=Kindred", "client.ext",
                ["ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
            ),
            (
                "other-server", "other-ca", "/CN=localhost", "server.ext",
                ["ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
            ),
        ]
        for (index, (name, ca, subject, extensions, keySpec)) in leaves.enumerated() {
            try runChecked(
                ["openssl", "req", "-newkey"] + keySpec
                    + ["-nodes", "-keyout", "\(name).key", "-out", "\(name).csr", "-subj", subject],
                in: directory
            )
            try openssl(
                "x509",
                "-req",
                "-in",
                "\(name).csr",
                "-CA",
                "\(ca).pem",
                "-CAkey",
                "\(ca).key",
                "-set_serial",
                "\(index + 10)",
                "-days",
                "2",
                "-out",
                "\(name).pem",
                "-extfile",
                extensions
            )
        }
        return TestPKI(directory: directory)
    }
}
