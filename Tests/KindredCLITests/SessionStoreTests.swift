import Foundation
import Testing

@testable import KindredCLI

@Suite struct SessionStoreTests {
    @Test func roundTrip() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let store = SessionStore(directory: directory.path + "/nested/kindred")
        #expect(try store.load() == nil)

        var session = storedSession(accessExpires: 1_700_000_000_000)
        session.caFile = "/etc/kindred/ca.pem"
        try store.save(session)
        #expect(try store.load() == session)
        #expect(try store.remove())
        #expect(try store.load() == nil)
        #expect(try !store.remove())
    }

    @Test func fileIs0600InA0700Directory() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let store = SessionStore(directory: directory.path + "/config/kindred")
        // A permissive umask must not widen either mode.
        let previous = umask(0)
        defer { umask(previous) }
        try store.save(storedSession(accessExpires: 1))
        #expect(try permissions(store.path) == 0o600)
        #expect(try permissions(store.directory) == 0o700)
        #expect(try permissions(directory.path + "/config") == 0o700)
    }

    @Test func existingDirectoryKeepsItsMode() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        chmod(directory.path, 0o750)
        try SessionStore(directory: directory.path).save(storedSession(accessExpires: 1))
        #expect(try permissions(directory.path) == 0o750)
        #expect(try permissions(directory.path + "/session.json") == 0o600)
    }

    @Test func saveReplacesTheFileAtomically() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let store = SessionStore(directory: directory.path)
        try store.save(storedSession(accessExpires: 1, refresh: "first"))
        let firstInode = try FileManager.default.attributesOfItem(atPath: store.path)[.systemFileNumber] as? Int
        // A reader holding the old file keeps reading the old contents: the new file is a different inode.
        let reader = try FileHandle(forReadingFrom: URL(fileURLWithPath: store.path))
        defer { try? reader.close() }

        try store.save(storedSession(accessExpires: 2, refresh: "second"))
        let secondInode = try FileManager.default.attributesOfItem(atPath: store.path)[.systemFileNumber] as? Int
        #expect(firstInode != secondInode)
        #expect(try store.load()?.refreshToken == "second")
        let old = try JSONDecoder.session.decode(StoredSession.self, from: reader.readToEnd() ?? Data())
        #expect(old.refreshToken == "first")
        // No temporary files are left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == ["session.json"])
    }

    @Test func fileUsesSnakeCaseKeys() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let store = SessionStore(directory: directory.path)
        try store.save(storedSession(accessExpires: 1_700_000_000_000))
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: store.path)))
        let keys = Set((object as? [String: Any])?.keys.map { $0 } ?? [])
        #expect(
            keys == [
                "version", "gateway", "tls", "community", "user_id", "username", "session_id", "access_token",
                "access_token_expires_unix_ms", "refresh_token", "refresh_token_expires_unix_ms",
            ]
        )
    }

    @Test(arguments: ["", "{", "not json", "{\"version\": 1}", "[1, 2]"])
    func corruptFileIsAClearError(contents: String) throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let store = SessionStore(directory: directory.path)
        try store.createDirectory()
        try Data(contents.utf8).write(to: URL(fileURLWithPath: store.path))
        #expect(throws: CLIError.unreadableSession(path: store.path, problem: "not a kindred session file")) {
            try store.load()
        }
        let error = CLIError.unreadableSession(path: store.path, problem: "not a kindred session file")
        #expect(error.description.contains(store.path))
        #expect(error.description.contains("kindred signout"))
        #expect(error.exitStatus == .localError)
    }

    @Test func newerFormatIsRefused() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let store = SessionStore(directory: directory.path)
        var session = storedSession(accessExpires: 1)
        session.version = 2
        try store.save(session)
        #expect(throws: CLIError.unreadableSession(path: store.path, problem: "format version 2 is not supported")) {
            try store.load()
        }
    }

    @Test func lockIsExclusive() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let store = SessionStore(directory: directory.path)
        // flock locks belong to the open file description, so a second open in this process contends too.
        try await store.withLock(timeout: .seconds(1)) {
            await #expect(throws: CLIError.self) {
                try await store.withLock(timeout: .milliseconds(100)) {}
            }
            return ()
        }
        // Released afterwards.
        try await store.withLock(timeout: .milliseconds(100)) {}
    }
}
