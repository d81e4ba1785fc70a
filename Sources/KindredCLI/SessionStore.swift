import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `session.json` in the config directory: the one signed-in session of this user on this machine.
///
/// The file holds a refresh token, so it is created with mode 0600 in a directory created with mode 0700,
/// and replaced atomically (a temporary file in the same directory, fsync, rename): a crash leaves the old
/// session or the new one, never half a file. Refreshes, which spend the stored refresh token, run under an
/// exclusive lock on `session.lock`, so two `kindred` processes never present the same token twice (the
/// server would take that for theft and end the session).
public struct SessionStore: Sendable {
    public let directory: String

    public init(directory: String) {
        self.directory = directory
    }

    public var path: String { self.directory + "/session.json" }
    var lockPath: String { self.directory + "/session.lock" }

    /// The stored session, or nil when there is none.
    public func load() throws(CLIError) -> StoredSession? {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: self.path))
        } catch {
            if !FileManager.default.fileExists(atPath: self.path) { return nil }
            throw .unreadableSession(path: self.path, problem: "cannot read it")
        }
        let session: StoredSession
        do {
            session = try JSONDecoder.session.decode(StoredSession.self, from: data)
        } catch {
            throw .unreadableSession(path: self.path, problem: "not a kindred session file")
        }
        guard session.version == 1 else {
            throw .unreadableSession(path: self.path, problem: "format version \(session.version) is not supported")
        }
        return session
    }

    /// Replaces the stored session atomically.
    public func save(_ session: StoredSession) throws(CLIError) {
        try self.createDirectory()
        let bytes: [UInt8]
        do {
            bytes = Array(try JSONEncoder.session.encode(session)) + [UInt8(ascii: "\n")]
        } catch {
            preconditionFailure("StoredSession always encodes: \(error)")
        }
        let temporary = "\(self.directory)/.session.json.\(getpid()).\(UInt32.random(in: .min ... .max)).tmp"
        // O_EXCL: never follow a planted symlink or reuse someone else's file.
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .storage(path: temporary, operation: "create", errno: errno) }
        var closed = false
        defer {
            if !closed { close(fd) }
        }
        do throws(CLIError) {
            // The umask can only remove bits; set the mode exactly anyway.
            guard fchmod(fd, 0o600) == 0 else { throw .storage(path: temporary, operation: "chmod", errno: errno) }
            try Self.writeAll(fd, bytes, path: temporary)
            guard fsync(fd) == 0 else { throw .storage(path: temporary, operation: "sync", errno: errno) }
            closed = true
            guard close(fd) == 0 else { throw .storage(path: temporary, operation: "close", errno: errno) }
            guard rename(temporary, self.path) == 0 else {
                throw .storage(path: self.path, operation: "replace", errno: errno)
            }
        } catch {
            unlink(temporary)
            throw error
        }
        // Make the rename itself durable; failing that is no reason to fail the save.
        let directoryFD = open(self.directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
    }

    /// Deletes the stored session; returns whether there was one.
    @discardableResult
    public func remove() throws(CLIError) -> Bool {
        if unlink(self.path) == 0 { return true }
        if errno == ENOENT { return false }
        throw .storage(path: self.path, operation: "remove", errno: errno)
    }

    /// Runs `body` holding the exclusive lock on `session.lock`, waiting at most `timeout` for it.
    public func withLock<Result>(timeout: Duration, _ body: () async throws -> Result) async throws -> Result {
        try self.createDirectory()
        let fd = open(self.lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CLIError.storage(path: self.lockPath, operation: "open", errno: errno) }
        // Closing the descriptor releases the lock, also when the process dies.
        defer { close(fd) }
        let deadline = ContinuousClock.now + timeout
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else {
                throw CLIError.storage(path: self.lockPath, operation: "lock", errno: errno)
            }
            guard ContinuousClock.now < deadline else {
                throw CLIError.input("another kindred process holds \(self.lockPath); try again")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try await body()
    }

    /// Creates the directory (and missing parents) with mode 0700. An existing directory is left as it is.
    func createDirectory() throws(CLIError) {
        var status = stat()
        if stat(self.directory, &status) == 0 { return }
        var path = ""
        for component in self.directory.split(separator: "/", omittingEmptySubsequences: true) {
            path += (path.isEmpty && !self.directory.hasPrefix("/") ? "" : "/") + component
            if mkdir(path, 0o700) == 0 {
                // The umask may have removed bits from 0700; never added any.
                guard chmod(path, 0o700) == 0 else { throw .storage(path: path, operation: "chmod", errno: errno) }
            } else if errno != EEXIST {
                throw .storage(path: path, operation: "create", errno: errno)
            }
        }
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws(CLIError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                throw .storage(path: path, operation: "write", errno: errno)
            }
            offset += written
        }
    }
}

extension JSONEncoder {
    static var session: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return encoder
    }
}

extension JSONDecoder {
    static var session: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return decoder
    }
}

/// The C library's text for an errno value.
func systemErrorText(_ code: Int32) -> String {
    String(cString: strerror(code))
}
