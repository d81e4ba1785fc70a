import Foundation
import KindredOpenSSL
import KindredPostgres

/// Where the bytes of photo renditions live, by content key (the SHA-256 of the bytes, lower-case hex). Two real
/// implementations: `PostgresPhotoBlobStore` (the default, table `photo_blobs`) and `FolderPhotoBlobStorage`
/// (`KINDRED_PROFILE_PHOTO_DIR`). An S3-compatible store would implement the same three calls with PUT, GET and
/// DELETE of the object `<prefix>/<key>` (README, Profile section).
///
/// Writes happen before the database transaction that references the keys commits, deletes after it committed;
/// so a crash between the two leaves at worst an unreferenced blob, never a reference without bytes.
public protocol PhotoBlobStorage: Sendable {
    /// Stores `bytes` under `key` (idempotent: the same key always holds the same bytes).
    func put(key: String, bytes: [UInt8]) async throws
    /// The bytes under `key`, nil if none.
    func get(key: String) async throws -> [UInt8]?
    /// Deletes the bytes under each key (missing keys are fine).
    func delete(keys: [String]) async throws
    /// How many of `keys` hold bytes (footprint checks).
    func count(keys: [String]) async throws -> Int
}

/// Content keys: the SHA-256 of the bytes, lower-case hex.
enum PhotoBlobKey {
    static func of(_ bytes: [UInt8]) -> String {
        SHA256.hash(bytes).map { String(format: "%02x", $0) }.joined()
    }

    /// 64 lower-case hex characters (nothing else ever reaches a file name).
    static func isValid(_ key: String) -> Bool {
        key.utf8.count == 64 && key.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }
    }
}

/// Photo bytes as files in a content-addressed folder: `<root>/<key[0..2]>/<key>`, written to a temporary file
/// and renamed into place (a reader never sees half a file). File I/O runs on a dedicated thread pool.
public struct FolderPhotoBlobStorage: PhotoBlobStorage {
    public let root: URL

    /// Creates the folder if needed.
    public init(root: String) throws {
        self.root = URL(fileURLWithPath: root, isDirectory: true)
        try FileManager.default.createDirectory(at: self.root, withIntermediateDirectories: true)
    }

    func path(_ key: String) throws -> URL {
        guard PhotoBlobKey.isValid(key) else { throw CocoaError(.fileReadInvalidFileName) }
        return self.root.appendingPathComponent(String(key.prefix(2)), isDirectory: true).appendingPathComponent(key)
    }

    public func put(key: String, bytes: [UInt8]) async throws {
        let target = try self.path(key)
        try await Self.io {
            if FileManager.default.fileExists(atPath: target.path) { return }
            try FileManager.default.createDirectory(
                at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
            let temporary = target.deletingLastPathComponent().appendingPathComponent(".\(key).\(UUID().uuidString)")
            try Data(bytes).write(to: temporary)
            if rename(temporary.path, target.path) != 0 {
                try? FileManager.default.removeItem(at: temporary)
                throw CocoaError(.fileWriteUnknown)
            }
        }
    }

    public func get(key: String) async throws -> [UInt8]? {
        let target = try self.path(key)
        return try await Self.io {
            guard let data = FileManager.default.contents(atPath: target.path) else { return nil }
            return [UInt8](data)
        }
    }

    public func delete(keys: [String]) async throws {
        let targets = try keys.map(self.path)
        try await Self.io {
            for target in targets where FileManager.default.fileExists(atPath: target.path) {
                try FileManager.default.removeItem(at: target)
            }
        }
    }

    public func count(keys: [String]) async throws -> Int {
        let targets = try keys.map(self.path)
        return await Self.io { targets.filter { FileManager.default.fileExists(atPath: $0.path) }.count }
    }

    /// Every file in the folder (tests and footprint checks of a whole store).
    public func fileCount() -> Int {
        let enumerator = FileManager.default.enumerator(at: self.root, includingPropertiesForKeys: [.isRegularFileKey])
        var count = 0
        while let url = enumerator?.nextObject() as? URL {
            if (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true { count += 1 }
        }
        return count
    }

    /// Runs blocking file I/O off the caller's executor.
    private static func io<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                continuation.resume(with: Result { try body() })
            }
        }
    }

    private static func io<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async { continuation.resume(returning: body()) }
        }
    }
}
