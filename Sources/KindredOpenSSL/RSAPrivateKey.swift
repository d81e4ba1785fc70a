internal import COpenSSL

/// An RSA signing key, to sign RS256 JWTs (RSASSA-PKCS1-v1_5 with SHA-256, RFC 7518 §3.3), as a Google service
/// account signs the assertion of its OAuth 2.0 JWT bearer grant (RFC 7523).
public struct RSAPrivateKey: Sendable, CustomStringConvertible {
    let key: EVPKey

    /// A key from unencrypted PEM text: PKCS#8 (`-----BEGIN PRIVATE KEY-----`, as in a service-account JSON key)
    /// or PKCS#1 (`-----BEGIN RSA PRIVATE KEY-----`).
    public init(pemRepresentation: String) throws {
        self.key = try Self.checked(EVPKey.fromPEM(pemRepresentation.utf8, private: true))
    }

    private static func checked(_ key: EVPKey) throws -> EVPKey {
        let bits = key.withUnsafePointer { Int(EVP_PKEY_get_bits($0)) }
        guard key.isA("RSA"), bits >= 2048 else {
            throw OpenSSLError(code: .invalidKey, message: "the PEM key is not an RSA key of at least 2048 bits")
        }
        return key
    }

    /// The RS256 signature of `message` (as long as the modulus).
    public func signRS256(_ message: some Sequence<UInt8>) throws -> [UInt8] {
        try self.key.sign(message, digest: FetchedDigest.sha256)
    }

    public var description: String { "RSAPrivateKey(<redacted>)" }
}
