import Foundation
import KindredGRPCServices
import KindredOpenSSL

/// The service's Ed25519 signing key: loaded from a PEM file, generated (mode 0600) when missing.
public struct SigningKey: Sendable {
    public let keyID: String
    public let privateKey: Ed25519PrivateKey
    public let createdUnixMilliseconds: Int64

    public init(privateKey: Ed25519PrivateKey, createdUnixMilliseconds: Int64 = 0) {
        self.privateKey = privateKey
        // A stable id derived from the public key: the same key always has the same "kid".
        self.keyID = String(Base64URL.encode(SHA256.hash(privateKey.publicKey.rawRepresentation)).prefix(16))
        self.createdUnixMilliseconds = createdUnixMilliseconds
    }

    public static func loadOrCreate(path: String) throws -> SigningKey {
        let manager = FileManager.default
        if !manager.fileExists(atPath: path) {
            let directory = (path as NSString).deletingLastPathComponent
            if !directory.isEmpty {
                try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
            }
            // Written whole under a name of its own, then linked to `path`, which fails if the file exists: replicas
            // starting together on one data folder all end up with the key of the first link, never each its own.
            let key = try Ed25519PrivateKey()
            let draft = "\(path).\(UUID().uuidString)"
            guard
                manager.createFile(
                    atPath: draft,
                    contents: Data(try key.pemRepresentation.utf8),
                    attributes: [.posixPermissions: 0o600]
                )
            else {
                throw ConfigurationError(key: "KINDRED_AUTH_SIGNING_KEY_FILE", problem: "cannot be created")
            }
            let linked = link(draft, path)
            let linkError = errno
            unlink(draft)
            guard linked == 0 || linkError == EEXIST else {
                throw ConfigurationError(key: "KINDRED_AUTH_SIGNING_KEY_FILE", problem: "cannot be created")
            }
        }
        let attributes = try manager.attributesOfItem(atPath: path)
        let created = (attributes[.creationDate] as? Date) ?? (attributes[.modificationDate] as? Date) ?? Date()
        return SigningKey(
            privateKey: try Ed25519PrivateKey(pemFile: path),
            createdUnixMilliseconds: Int64(created.timeIntervalSince1970 * 1000)
        )
    }
}
