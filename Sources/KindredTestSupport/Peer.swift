import Foundation

// Independent peers for protocol tests: the Python servers in Tests/Peers (APNs, FCM, Web Push, JWKS), their throwaway keys
// and certificates, what they recorded and the answers they are told to give. See Tests/Peers/README.md.

/// Throwaway keys and certificates written by `Tests/Peers/push_test_keys.py` into a temporary folder, once per
/// test process (generating RSA keys for every test made a burst of CPU work at the start of a parallel run). Each
/// test still starts its own peer, with its own record and rules files.
public struct PeerKeys: Sendable {
    public let folder: String

    public var caFile: String { self.folder + "/ca.pem" }
    public var serverCertificate: String { self.folder + "/server.pem" }
    public var serverKey: String { self.folder + "/server-key.pem" }
    public var apnsKey: String { self.folder + "/apns-key.p8" }
    public var apnsPublicKey: String { self.folder + "/apns-key.pub.pem" }
    public var apnsOtherKey: String { self.folder + "/apns-other-key.p8" }
    public var fcmServiceAccount: String { self.folder + "/fcm-service-account.json" }
    public var fcmPublicKey: String { self.folder + "/fcm-service-account.pub.pem" }
    public var fcmOtherAccount: String { self.folder + "/fcm-other-account.json" }
    public var vapidKey: String { self.folder + "/vapid-key.pem" }
    public var vapidPublicKey: String { self.folder + "/vapid-key.pub.pem" }
    public var vapidOtherKey: String { self.folder + "/vapid-other-key.pem" }

    private static let generated = Task { () throws -> PeerKeys in
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("kindred-peers-\(UUID().uuidString)").path
        let output = try await runPython(peerScript("push_test_keys.py"), [folder, "--project", "kindred-test"])
        guard output.status == 0 else { throw PeerFailure("push_test_keys.py failed: \(output.errorText)") }
        return PeerKeys(folder: folder)
    }

    /// The keys of this test process (made by the first caller).
    public static func shared() async throws -> PeerKeys {
        try await Self.generated.value
    }
}

/// The path of a script in Tests/Peers.
public func peerScript(_ name: String) -> String {
    // Sources/KindredTestSupport/Peer.swift → the repository root.
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Tests/Peers/\(name)").path
}

/// A peer or its keys could not be set up; the message says why.
public struct PeerFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A push peer (`apns_peer.py` or `fcm_peer.py`) running for one test: its port, the JSON lines it recorded and
/// the rules file it answers by.
public final class Peer: Sendable {
    public let port: Int
    public let recordFile: String
    public let rulesFile: String
    private let process: Process
    private let input: Pipe

    private init(port: Int, recordFile: String, rulesFile: String, process: Process, input: Pipe) {
        self.port = port
        self.recordFile = recordFile
        self.rulesFile = rulesFile
        self.process = process
        self.input = input
    }

    /// Starts `script` with `arguments` (plus TLS, record and rules options) and waits for "LISTENING <port>".
    public static func start(_ script: String, keys: PeerKeys, arguments: [String]) async throws -> Peer {
        let name = (script as NSString).deletingPathExtension
        let recordFile = keys.folder + "/\(name)-\(UUID().uuidString).jsonl"
        let rulesFile = keys.folder + "/\(name)-rules-\(UUID().uuidString).json"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            ["python3", peerScript(script), "--cert", keys.serverCertificate, "--key", keys.serverKey,
             "--record", recordFile, "--rules", rulesFile, "--exit-on-stdin-eof"] + arguments
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        let line = try await offThePool { () -> String? in
            var bytes: [UInt8] = []
            while true {
                let chunk = output.fileHandleForReading.readData(ofLength: 1)
                guard let byte = chunk.first, byte != 0x0A else { break }
                bytes.append(byte)
            }
            return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
        }
        guard let line, line.hasPrefix("LISTENING "), let port = Int(line.dropFirst("LISTENING ".count)) else {
            kill(process.processIdentifier, SIGKILL)
            throw PeerFailure("\(script) did not start (are h2 and cryptography installed?): \(line ?? "no output")")
        }
        return Peer(port: port, recordFile: recordFile, rulesFile: rulesFile, process: process, input: input)
    }

    /// The peer's (first) process.
    public var processIdentifier: Int32 { self.process.processIdentifier }

    /// Stops the peer: closes its stdin and kills it (Foundation starts children with SIGTERM blocked). Does not
    /// wait for the exit: that would hold a thread of the cooperative pool.
    public func stop() {
        try? self.input.fileHandleForWriting.close()
        if self.process.isRunning { kill(self.process.processIdentifier, SIGKILL) }
    }

    /// Every request recorded so far, in arrival order.
    public func records() throws -> [[String: Any]] {
        guard let data = FileManager.default.contents(atPath: self.recordFile) else { return [] }
        return try String(decoding: data, as: UTF8.self).split(separator: "\n").map { line in
            try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] ?? [:]
        }
    }

    /// Sets the answers by target (see `Rules` in Tests/Peers/h2_peer.py). The peer re-reads the file when its
    /// modification time changes; the write goes through a rename so it never reads half a file.
    public func setRules(_ rules: [String: [String: Any]]) throws {
        let data = try JSONSerialization.data(withJSONObject: rules)
        let temporary = self.rulesFile + ".new"
        try data.write(to: URL(fileURLWithPath: temporary))
        _ = rename(temporary, self.rulesFile)
    }
}

/// A free TCP port on 127.0.0.1 that nothing listens on (bound, then released).
public func unusedPort() throws -> Int {
    let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard socket >= 0 else { throw PeerFailure("socket() failed") }
    defer { close(socket) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0
        }
    }
    guard bound else { throw PeerFailure("no free port") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// A clock a test moves by hand.
public final class TestClock: @unchecked Sendable {
    private let lock = NSLock()
    private var current: Date

    public init(_ start: Date) { self.current = start }

    public var now: Date { self.lock.withLock { self.current } }

    public func advance(by seconds: TimeInterval) {
        self.lock.withLock { self.current += seconds }
    }
}
