import Foundation

/// `nats-server` processes with JetStream for tests: one node, or a cluster of three on loopback (routes between
/// them, each with its own store in a temporary folder). Nodes can be killed (SIGKILL) and started again on the
/// same port and store. ``stop()`` kills them all and removes the folder; so does dropping the cluster (a test that
/// threw before its `stop()`), and a node outlives the test process by at most half a second.
public final class NATSTestCluster: @unchecked Sendable {
    public let ports: [Int]
    private let clusterPorts: [Int]
    private let folder: String
    private let lock = NSLock()
    private var processes: [Process?]

    /// The client URLs, comma-separated (`KINDRED_EVENTS_NATS_URL`'s form).
    public var url: String { self.ports.map { "nats://127.0.0.1:\($0)" }.joined(separator: ",") }

    /// Starts `nodes` servers (1 or 3) and returns once each accepts connections and, for a cluster, JetStream
    /// has a meta leader (a stream can be created).
    /// A port found free may be taken by another process before the server binds it: a node that exits before it
    /// listens is tried again on new ports (three times).
    public static func start(nodes: Int = 1) async throws -> NATSTestCluster {
        precondition(nodes == 1 || nodes == 3)
        var attempt = 0
        while true {
            attempt += 1
            let ports = try (0..<nodes).map { _ in try freePort() }
            let clusterPorts = try (0..<nodes).map { _ in try freePort() }
            let folder = NSTemporaryDirectory() + "kindred-nats-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let cluster = NATSTestCluster(ports: ports, clusterPorts: clusterPorts, folder: folder)
            do {
                for node in 0..<nodes { try cluster.startNode(node) }
                for node in 0..<nodes { try await cluster.waitUntilListening(node) }
                return cluster
            } catch {
                let log = (try? String(contentsOfFile: "\(folder)/n0.log", encoding: .utf8)) ?? ""
                cluster.stop()
                if attempt >= 3 { throw PeerFailure("\(error); n0's log: \(log.suffix(500))") }
            }
        }
    }

    private init(ports: [Int], clusterPorts: [Int], folder: String) {
        self.ports = ports
        self.clusterPorts = clusterPorts
        self.folder = folder
        self.processes = Array(repeating: nil, count: ports.count)
    }

    /// Starts node `node` again (after ``kill(_:)``), on its port and store.
    public func startNode(_ node: Int) throws {
        let directory = "\(self.folder)/n\(node)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var arguments = [
            "-a", "127.0.0.1", "-p", "\(self.ports[node])", "-js", "-sd", directory, "-n", "n\(node)",
        ]
        if self.ports.count > 1 {
            let routes = self.clusterPorts.enumerated().filter { $0.offset != node }
                .map { "nats://127.0.0.1:\($0.element)" }.joined(separator: ",")
            arguments += [
                "--cluster_name", "kindred", "--cluster", "nats://127.0.0.1:\(self.clusterPorts[node])", "--routes", routes,
            ]
        }
        // The shell becomes nats-server (`exec`, same pid: kill(_:) reaches the server itself) after starting a
        // watcher that kills it once the test process is gone, however that ended. The watcher keeps no inherited
        // descriptor (`TestProcessShell`).
        let watched = """
            test_process=$1; shift
            ( \(TestProcessShell.closeInheritedDescriptors)
              while kill -0 $$ 2>/dev/null; do
                  if [ ! -d "/proc/$test_process" ]; then kill -9 $$; exit 0; fi
                  sleep 0.5
              done ) </dev/null >/dev/null 2>&1 &
            exec "$@"
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", watched, "bash", String(getpid()), Self.executable] + arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        let log = "\(self.folder)/n\(node).log"
        FileManager.default.createFile(atPath: log, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: log)
        try process.run()
        self.lock.withLock { self.processes[node] = process }
    }

    /// SIGKILL of node `node`.
    public func kill(_ node: Int) {
        guard let process = self.lock.withLock({ self.processes[node] }) else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.lock.withLock { self.processes[node] = nil }
    }

    deinit {
        self.stop()
    }

    public func stop() {
        for node in 0..<self.ports.count { self.kill(node) }
        try? FileManager.default.removeItem(atPath: self.folder)
    }

    /// Waits until node `node` accepts TCP connections (at most 60 s: a loaded machine); throws at once if it exited.
    public func waitUntilListening(_ node: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if Self.accepts(port: self.ports[node]) { return }
            if let process = self.lock.withLock({ self.processes[node] }), !process.isRunning {
                throw PeerFailure("nats-server n\(node) exited with status \(process.terminationStatus)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw PeerFailure("nats-server n\(node) did not listen on \(self.ports[node])")
    }

    /// `nats-server` (Debian installs it in /usr/sbin).
    public static var executable: String {
        for path in ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"]
        where FileManager.default.isExecutableFile(atPath: path) {
            return path
        }
        return "/usr/sbin/nats-server"
    }

    private static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw PeerFailure("socket failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw PeerFailure("bind failed") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw PeerFailure("getsockname failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
