import KindredOpenSSL

/// Opaque one-time and refresh tokens: 256 random bits, base64url for the client, SHA-256 in the database.
enum OpaqueToken {
    static func generate() throws -> (token: String, hash: [UInt8]) {
        let token = Base64URL.encode(try SecureRandom.bytes(count: 32))
        return (token, self.hash(token))
    }

    static func hash(_ token: String) -> [UInt8] { SHA256.hash(Array(token.utf8)) }

    /// Whether `token` could be one of ours (base64url, 1..128 characters); anything else is rejected unhashed.
    static func isPlausible(_ token: String) -> Bool {
        !token.isEmpty && token.utf8.count <= 128 && Base64URL.decode(token) != nil
    }
}
