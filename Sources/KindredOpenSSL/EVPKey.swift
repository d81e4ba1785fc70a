internal import COpenSSL

/// Owns an `EVP_PKEY`.
///
/// `@unchecked Sendable`: the key is never mutated after initialisation, and OpenSSL 3 allows one
/// `EVP_PKEY` to be used by many threads at once as long as each operation has its own
/// `EVP_MD_CTX`, which ``sign(_:digest:)`` and ``verify(_:for:digest:)`` create per call.
final class EVPKey: @unchecked Sendable {
    private let pointer: OpaquePointer

    init(takingOwnership pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        EVP_PKEY_free(self.pointer)
    }

    func withUnsafePointer<Result>(_ body: (OpaquePointer) throws -> Result) rethrows -> Result {
        try body(self.pointer)
    }

    /// Whether the key is of the named algorithm ("ED25519", "RSA", "EC").
    func isA(_ name: String) -> Bool {
        EVP_PKEY_is_a(self.pointer, name) == 1
    }

    /// Signs `message` (hashing it with `digest` first; nil for Ed25519, which hashes internally).
    func sign(_ message: some Sequence<UInt8>, digest: FetchedDigest?) throws -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else {
            throw OpenSSLError.fromErrorQueue(.cryptoFailed, "EVP_MD_CTX_new failed")
        }
        defer { EVP_MD_CTX_free(context) }
        ERR_clear_error()
        // Returns 1 on success, 0 or negative on failure (unsupported key, allocation).
        guard EVP_DigestSignInit(context, nil, digest?.pointer, nil, self.pointer) == 1 else {
            throw OpenSSLError.fromErrorQueue(.cryptoFailed, "EVP_DigestSignInit failed")
        }
        return try withContiguousBytes(message) { message in
            let input = message.baseAddress!.assumingMemoryBound(to: UInt8.self)
            var length = 0
            // One-shot EVP_DigestSign: a NULL output asks for the maximum signature length.
            guard EVP_DigestSign(context, nil, &length, input, message.count) == 1 else {
                throw OpenSSLError.fromErrorQueue(.cryptoFailed, "EVP_DigestSign (length) failed")
            }
            var signature = [UInt8](repeating: 0, count: length)
            guard EVP_DigestSign(context, &signature, &length, input, message.count) == 1 else {
                throw OpenSSLError.fromErrorQueue(.cryptoFailed, "EVP_DigestSign failed")
            }
            signature.removeLast(signature.count - length)
            return signature
        }
    }

    /// Whether `signature` is valid for `message`. Any failure, malformed signatures included, is `false`.
    func verify(_ signature: some Sequence<UInt8>, for message: some Sequence<UInt8>, digest: FetchedDigest?) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        ERR_clear_error()
        defer { ERR_clear_error() }  // a rejected signature leaves reasons behind; they are expected
        guard EVP_DigestVerifyInit(context, nil, digest?.pointer, nil, self.pointer) == 1 else { return false }
        return withContiguousBytes(signature) { signature in
            withContiguousBytes(message) { message in
                // Returns 1 if valid, 0 if invalid, negative on other errors (e.g. malformed DER).
                EVP_DigestVerify(
                    context,
                    signature.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    signature.count,
                    message.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    message.count
                ) == 1
            }
        }
    }

    /// Raw public key bytes (Ed25519: 32 bytes).
    func rawPublicKey() -> [UInt8] {
        var length = 0
        guard EVP_PKEY_get_raw_public_key(self.pointer, nil, &length) == 1 else {
            preconditionFailure("EVP_PKEY_get_raw_public_key failed on a key that has one")
        }
        var bytes = [UInt8](repeating: 0, count: length)
        guard EVP_PKEY_get_raw_public_key(self.pointer, &bytes, &length) == 1 else {
            preconditionFailure("EVP_PKEY_get_raw_public_key failed on a key that has one")
        }
        return bytes
    }

    /// The SEC 1 encoded public point of an EC key: 65 bytes `04 ‖ x ‖ y` for P-256 (OpenSSL's default format,
    /// uncompressed).
    func publicPoint() throws -> [UInt8] {
        var length = 0
        ERR_clear_error()
        // Returns 1 on success; 0 when the key has no public part or the buffer is too small.
        guard kindred_EVP_PKEY_get_public_point(self.pointer, nil, 0, &length) == 1, length > 0 else {
            throw OpenSSLError.fromErrorQueue(.invalidKey, "the key has no public point")
        }
        var point = [UInt8](repeating: 0, count: length)
        guard kindred_EVP_PKEY_get_public_point(self.pointer, &point, point.count, &length) == 1 else {
            throw OpenSSLError.fromErrorQueue(.cryptoFailed, "reading the public point failed")
        }
        return Array(point[0..<length])
    }

    /// PEM text: "PUBLIC KEY" (SubjectPublicKeyInfo) or unencrypted "PRIVATE KEY" (PKCS#8).
    func pem(private isPrivate: Bool) throws -> String {
        guard let bio = BIO_new(BIO_s_mem()) else {
            throw OpenSSLError.fromErrorQueue(.cryptoFailed, "BIO_new failed")
        }
        defer { BIO_free(bio) }
        ERR_clear_error()
        let ok =
            isPrivate
            ? PEM_write_bio_PKCS8PrivateKey(bio, self.pointer, nil, nil, 0, nil, nil)
            : PEM_write_bio_PUBKEY(bio, self.pointer)
        guard ok == 1 else { throw OpenSSLError.fromErrorQueue(.cryptoFailed, "writing PEM failed") }
        return memoryBIOString(bio)
    }

    /// Reads one key from PEM text. Encrypted keys are refused rather than prompting on the terminal.
    static func fromPEM(_ pem: some Sequence<UInt8>, private isPrivate: Bool, file: String? = nil) throws -> EVPKey {
        try withContiguousBytes(pem) { pem in
            guard let bio = BIO_new_mem_buf(pem.baseAddress, Int32(pem.count)) else {
                throw OpenSSLError.fromErrorQueue(.cryptoFailed, "BIO_new_mem_buf failed")
            }
            defer { BIO_free(bio) }
            ERR_clear_error()
            let key =
                isPrivate
                ? PEM_read_bio_PrivateKey(bio, nil, refusePassphrase, nil)
                : PEM_read_bio_PUBKEY(bio, nil, refusePassphrase, nil)
            guard let key else {
                throw OpenSSLError.fromErrorQueue(
                    .invalidKey,
                    isPrivate ? "not an unencrypted PEM private key" : "not a PEM public key",
                    file: file
                )
            }
            return EVPKey(takingOwnership: key)
        }
    }

    /// Builds a public key from OSSL_PARAMs (`EVP_PKEY_fromdata`) and checks it (`EVP_PKEY_public_check`).
    static func publicKey(algorithm: String, parameters: UnsafePointer<OSSL_PARAM>) throws -> EVPKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, algorithm, nil) else {
            throw OpenSSLError.fromErrorQueue(.cryptoFailed, "EVP_PKEY_CTX_new_from_name failed")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var pointer: OpaquePointer?
        ERR_clear_error()
        guard EVP_PKEY_fromdata_init(context) == 1,
            EVP_PKEY_fromdata(
                context,
                &pointer,
                kindred_EVP_PKEY_PUBLIC_KEY(),
                UnsafeMutablePointer(mutating: parameters)
            ) == 1,
            let pointer
        else {
            throw OpenSSLError.fromErrorQueue(.invalidKey, "key components rejected")
        }
        let key = EVPKey(takingOwnership: pointer)
        guard let check = EVP_PKEY_CTX_new_from_pkey(nil, pointer, nil) else {
            throw OpenSSLError.fromErrorQueue(.cryptoFailed, "EVP_PKEY_CTX_new_from_pkey failed")
        }
        defer { EVP_PKEY_CTX_free(check) }
        // Returns 1 if the public key is valid (point on the curve; RSA modulus and exponent sane).
        guard EVP_PKEY_public_check(check) == 1 else {
            throw OpenSSLError.fromErrorQueue(.invalidKey, "public key check failed")
        }
        return key
    }
}

/// A `pem_password_cb` that supplies no passphrase: loading an encrypted key fails instead of
/// OpenSSL's default of prompting on the controlling terminal.
let refusePassphrase: @convention(c) (UnsafeMutablePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?) -> Int32 = {
    _,
    _,
    _,
    _ in 0
}

/// The contents of a memory BIO as UTF-8 text.
func memoryBIOString(_ bio: OpaquePointer) -> String {
    var data: UnsafeMutablePointer<CChar>?
    let length = kindred_BIO_get_mem_data(bio, &data)
    guard let data, length > 0 else { return "" }
    return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
}
