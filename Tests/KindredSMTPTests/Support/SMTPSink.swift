import Foundation
import Testing

/// A real SMTP server for a test: `python/smtp_sink.py` (aiosmtpd) on a free port, writing each
/// accepted message as JSON into a temporary folder.
struct SMTPSink: Sendable {
    struct Options: Sendable {
        /// STARTTLS with the test PKI's server certificate.
        var startTLS = false
        var requireSTARTTLS = false
        /// TLS from the first byte instead of STARTTLS.
        var implicitTLS = false
        /// A user name and password AUTH accepts (AUTH is only offered over TLS).
        var auth: (username: String, password: String)? = nil
        /// Mechanisms not offered, e.g. ["PLAIN"].
        var excludeAuth: [String] = []
        /// Recipients refused with 550 5.1.1.
        var rejectRecipients: [String] = []
        /// Recipients refused with 450 4.2.0.
        var tempfailRecipients: [String] = []
        /// Senders refused with 553.
        var rejectSenders: [String] = []
    }

    let port: Int
    let directory: String

    /// Starts a sink, runs `body`, stops the sink and removes its folder.
    static func with<T>(
        _ options: Options = Options(),
        _ body: (SMTPSink) async throws -> T
    ) async throws -> T {
        let directory = try makeTemporaryDirectory("kindred-smtp-sink")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("python/smtp_sink.py").path
        var arguments = ["python3", script, directory]
        if options.startTLS || options.implicitTLS {
            let pki = try TestPKI.get()
            arguments += ["--tls-cert", pki.serverCertificate, "--tls-key", pki.serverKey]
        }
        if options.requireSTARTTLS { arguments.append("--require-starttls") }
        if options.implicitTLS { arguments.append("--implicit-tls") }
        if let auth = options.auth { arguments += ["--auth", "\(auth.username):\(auth.password)"] }
        for mechanism in options.excludeAuth { arguments += ["--exclude-auth", mechanism] }
        for address in options.rejectRecipients { arguments += ["--reject-rcpt", address] }
        for address in options.tempfailRecipients { arguments += ["--tempfail-rcpt", address] }
        for address in options.rejectSenders { arguments += ["--reject-sender", address] }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        let exited = AsyncStream<Void>.makeStream()
        process.terminationHandler = { _ in exited.continuation.finish() }
        try process.run()
        defer {
            // Closing stdin makes the sink stop; it is awaited below on the normal path.
            try? input.fileHandleForWriting.close()
        }

        let line = await Self.firstLine(of: output.fileHandleForReading)
        guard let line, line.hasPrefix("LISTENING "), let port = Int(line.dropFirst("LISTENING ".count)) else {
            process.terminate()
            Issue.record("smtp_sink.py did not start (is aiosmtpd installed?): \(line ?? "no output")")
            throw SinkFailure()
        }
        let sink = SMTPSink(port: port, directory: directory)
        let result: T
        do {
            result = try await body(sink)
        } catch {
            Self.stop(process, input: input)
            for await _ in exited.stream {}
            throw error
        }
        Self.stop(process, input: input)
        for await _ in exited.stream {}
        return result
    }

    /// Reads the first line without blocking a cooperative thread.
    /// Closes the sink's stdin and kills it: a child spawned concurrently by another test may hold the stdin pipe
    /// open, so EOF alone may never arrive, and Foundation starts children with SIGTERM blocked.
    private static func stop(_ process: Process, input: Pipe) {
        try? input.fileHandleForWriting.close()
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    private static func firstLine(of handle: FileHandle) async -> String? {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var bytes: [UInt8] = []
                while true {
                    let chunk = handle.readData(ofLength: 1)
                    guard let byte = chunk.first, byte != 0x0A else { break }
                    bytes.append(byte)
                }
                continuation.resume(returning: bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self))
            }
        }
    }

    /// The messages accepted so far, in order.
    func delivered() throws -> [DeliveredMessage] {
        let names = try FileManager.default.contentsOfDirectory(atPath: self.directory)
            .filter { $0.hasPrefix("message-") && $0.hasSuffix(".json") }
            .sorted()
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try names.map { name in
            let data = try Data(contentsOf: URL(fileURLWithPath: self.directory + "/" + name))
            return try decoder.decode(DeliveredMessage.self, from: data)
        }
    }
}

struct SinkFailure: Error {}

/// A message as the sink recorded it; `parsed` is what Python's email package made of it.
struct DeliveredMessage: Decodable, Sendable {
    struct Address: Decodable, Sendable, Equatable {
        var name: String
        var address: String
    }

    struct Part: Decodable, Sendable, Equatable {
        var type: String
        var encoding: String?
    }

    struct Parsed: Decodable, Sendable {
        /// Subject decoded with `email.header.decode_header` / `make_header`.
        var subjectEmailHeader: String?
        /// Subject decoded by `email.policy.default`.
        var subject: String?
        var fromEmailHeader: String?
        var from: [Address]
        var to: [Address]
        var replyTo: [Address]
        var messageId: String?
        var date: String?
        var dateUtc: String?
        var contentType: String
        var parts: [Part]
        var headers: [String: String]
        var text: String?
        var html: String?
        var defects: [String]
        var maxLineLength: Int
        var bareLf: Bool
        var eightBit: Bool
    }

    var mailFrom: String
    var mailOptions: [String]
    var rcptTos: [String]
    var tls: Bool
    var authUser: String?
    var rawBase64: String
    var parsed: Parsed?
    var parseError: String?

    var raw: String { String(decoding: Data(base64Encoded: self.rawBase64) ?? Data(), as: UTF8.self) }
}

func makeTemporaryDirectory(_ prefix: String) throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// A free TCP port on 127.0.0.1 that nothing listens on (bound, then released).
func unusedPort() throws -> Int {
    let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard socket >= 0 else { throw SinkFailure() }
    defer { close(socket) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0
        }
    }
    guard bound else { throw SinkFailure() }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Runs a command to completion; throws with its output when it fails.
@discardableResult
func runChecked(_ arguments: [String], in directory: String) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    process.currentDirectoryURL = URL(fileURLWithPath: directory)
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    guard process.terminationStatus == 0 else {
        Issue.record("command failed: \(arguments.joined(separator: " "))\n\(text)")
        throw SinkFailure()
    }
    return text
}

/// A throwaway PKI made with the `openssl` CLI once per test run: a CA with a server certificate
/// for 127.0.0.1 and localhost, and an unrelated CA.
struct TestPKI: Sendable {
    let directory: String

    var caCertificate: String { self.directory + "/ca.pem" }
    var serverCertificate: String { self.directory + "/server.pem" }
    var serverKey: String { self.directory + "/server.key" }
    var otherCACertificate: String { self.directory + "/other-ca.pem" }

    private static let shared = Result { try TestPKI.generate() }

    static func get() throws -> TestPKI { try Self.shared.get() }

    private static func generate() throws -> TestPKI {
        let directory = try makeTemporaryDirectory("kindred-smtp-pki")
        func openssl(_ arguments: [String]) throws { try runChecked(["openssl"] + arguments, in: directory) }
        let ecKey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        for ca in ["ca", "other-ca"] {
            try openssl(
                ["req", "-x509"] + ecKey + [
                    "-keyout", "\(ca).key", "-out", "\(ca).pem", "-days", "2", "-subj", "/CN=Kindred SMTP Test \(ca)",
                    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                ]
            )
        }
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
            .write(toFile: directory + "/server.ext", atomically: true, encoding: .utf8)
        try openssl(["req"] + ecKey + ["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"])
        try openssl([
            "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", "10",
            "-days", "2", "-out", "server.pem", "-extfile", "server.ext",
        ])
        return TestPKI(directory: directory)
    }
}
