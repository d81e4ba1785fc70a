internal import COpenSSL

/// An Ed25519 signing key (RFC 8032), used to sign access tokens.
public struct Ed25519PrivateKey: Sendable, CustomStringConvertible {
    let key: EVPKey

    /// Generates a new key.
    public init() throws {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "ED25519", nil) else {
            throw OpenSSLError.fromErrorQueue(.cryptoFailed, "EVP_PKEY_CTX_new_from_name(ED25519) failed")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var pointer: OpaquePointer?
        ERR_clear_error()
        // Both return 1 on success, 0 or negative on failure.
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_generate(context, &pointer) == 1, let pointer else {
            throw OpenSSLError.fromErrorQueue(.cryptoFailed, "Ed25519 key generation failed")
        }
        self.key = EVPKey(takingOwnership: pointer)
    }

    /// A key from its 32-byte seed (RFC 8032's "private key").
    public init(rawRepresentation seed: some Sequence<UInt8>) throws {
        self.key = try withContiguousBytes(seed) { seed in
            guard seed.count == 32 else {
                throw OpenSSLError(code: .invalidKey, message: "an Ed25519 seed is 32 bytes")
            }
            ERR_clear_error()
            guard
                let pointer = EVP_PKEY_new_raw_private_key_ex(
                    nil,
                    "ED25519",
                    nil,
                    seed.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    seed.count
                )
            else { throw OpenSSLError.fromErrorQueue(.invalidKey, "Ed25519 seed rejected") }
            return EVPKey(takingOwnership: pointer)
        }
    }

    /// A key from unencrypted PKCS#8 PEM text (`-----BEGIN PRIVATE KEY-----`, as written by
    /// `openssl genpkey -algorithm ed25519`).
    public init(pemRepresentation: String) throws {
        self.key = try Self.checked(EVPKey.fromPEM(pemRepresentation.utf8, private: true), file: nil)
    }

    /// A key from an unencrypted PKCS#8 PEM file. Errors name the file, never its contents.
    public init(pemFile path: String) throws {
        let pem = try readFile(path, code: .invalidKey)
        self.key = try Self.checked(EVPKey.fromPEM(pem, private: true, file: path), file: path)
    }

    private static func checked(_ key: EVPKey, file: String?) throws -> EVPKey {
        guard key.isA("ED25519") else {
            throw OpenSSLError(code: .invalidKey, message: "the PEM key is not an Ed25519 key", file: file)
        }
        return key
    }

    public var publicKey: Ed25519PublicKey {
        // Cannot fail: the key was validated as Ed25519 and the raw bytes come from it.
        try! Ed25519PublicKey(rawRepresentation: self.key.rawPublicKey())
    }

    /// Unencrypted PKCS#8 PEM text, to store a generated key.
    public var pemRepresentation: String {
        get throws { try self.key.pem(private: true) }
    }

    /// The 64-byte Ed25519 signature of `message`.
    public func sign(_ message: some Sequence<UInt8>) throws -> [UInt8] {
        try self.key.sign(message, digest: nil)
    }

    public var description: String { "Ed25519PrivateKey(<redacted>)" }
}

/// An Ed25519 verification key.
public struct Ed25519PublicKey: Sendable, Hashable, CustomStringConvertible {
    let key: EVPKey
    /// The 32-byte encoded point.
    public let rawRepresentation: [UInt8]

    public init(rawRepresentation: some Sequence<UInt8>) throws {
        let raw = Array(rawRepresentation)
        guard raw.count == 32 else {
            throw OpenSSLError(code: .invalidKey, message: "an Ed25519 public key is 32 bytes")
        }
        ERR_clear_error()
        guard let pointer = EVP_PKEY_new_raw_public_key_ex(nil, "ED25519", nil, raw, raw.count) else {
            throw OpenSSLError.fromErrorQueue(.invalidKey, "Ed25519 public key rejected")
        }
        self.key = EVPKey(takingOwnership: pointer)
        self.rawRepresentation = raw
    }

    /// A key from PEM text (`-----BEGIN PUBLIC KEY-----`, SubjectPublicKeyInfo).
    public init(pemRepresentation: String) throws {
        let key = try EVPKey.fromPEM(pemRepresentation.utf8, private: false)
        guard key.isA("ED25519") else {
            throw OpenSSLError(code: .invalidKey, message: "the PEM key is not an Ed25519 key")
        }
        self.key = key
        self.rawRepresentation = key.rawPublicKey()
    }

    public var pemRepresentation: String {
        get throws { try self.key.pem(private: false) }
    }

    /// Whether `signature` is a valid Ed25519 signature of `message` by this key.
    public func isValidSignature(_ signature: some Sequence<UInt8>, for message: some Sequence<UInt8>) -> Bool {
        self.key.verify(signature, for: message, digest: nil)
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.rawRepresentation == rhs.rawRepresentation }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.rawRepresentation) }

    public var description: String {
        "Ed25519PublicKey(\(Base64URL.encode(self.rawRepresentation)))"
    }
}

/// Reads a whole (small) file through OpenSSL's BIO, so errors come back as OpenSSL errors naming the path.
func readFile(_ path: String, code: OpenSSLError.Code) throws -> [UInt8] {
    ERR_clear_error()
    guard let bio = BIO_new_file(path, "rb") else {
        throw OpenSSLError.fromErrorQueue(code, "cannot open file", file: path)
    }
    defer { BIO_free(bio) }
    var contents: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let read = BIO_read(bio, &chunk, Int32(chunk.count))
        if read <= 0 { break }
        contents += chunk[0..<Int(read)]
        guard contents.count <= 1 << 20 else {
            throw OpenSSLError(code: code, message: "file larger than 1 MiB", file: path)
        }
    }
    return contents
}
