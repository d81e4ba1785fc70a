internal import COpenSSL

/// AES-128 in Galois/Counter Mode (NIST SP 800-38D) with a 96-bit nonce and a 128-bit tag, no associated data:
/// the record cipher of the `aes128gcm` content coding (RFC 8188) that Web Push messages use.
public enum AES128GCM {
    public static let keyByteCount = 16
    public static let nonceByteCount = 12
    public static let tagByteCount = 16

    /// `plaintext` encrypted under `key` and `nonce`, followed by the 16-byte tag.
    public static func seal(_ plaintext: some Sequence<UInt8>, key: [UInt8], nonce: [UInt8]) throws -> [UInt8] {
        try GCM.seal(Array(plaintext), cipher: .aes128GCM, keyByteCount: Self.keyByteCount, key: key, nonce: nonce, aad: [])
    }

    /// The plaintext of `sealed` (ciphertext ‖ tag), or nil when the tag does not verify (altered, wrong key).
    public static func open(_ sealed: some Sequence<UInt8>, key: [UInt8], nonce: [UInt8]) throws -> [UInt8]? {
        try GCM.open(Array(sealed), cipher: .aes128GCM, keyByteCount: Self.keyByteCount, key: key, nonce: nonce, aad: [])
    }
}

/// AES in Galois/Counter Mode with a 96-bit nonce, a 128-bit tag and optional associated data, for a fetched
/// cipher of either key size (``AES128GCM``, ``AES256GCM``).
enum GCM {
    static let nonceByteCount = 12
    static let tagByteCount = 16

    static func seal(
        _ plaintext: [UInt8], cipher: Cipher, keyByteCount: Int, key: [UInt8], nonce: [UInt8], aad: [UInt8]
    ) throws -> [UInt8] {
        let context = try Context(cipher: cipher, keyByteCount: keyByteCount, key: key, nonce: nonce, encrypt: true)
        try context.authenticate(aad)
        var output = try context.update(plaintext)
        var scratch = [UInt8](repeating: 0, count: 16)
        var tag = [UInt8](repeating: 0, count: Self.tagByteCount)
        var length: Int32 = 0
        // Final returns 1 on success (GCM has no buffered block, so it writes nothing); GET_TAG returns 1 once the
        // tag is computed.
        guard EVP_EncryptFinal_ex(context.pointer, &scratch, &length) == 1, length == 0,
            EVP_CIPHER_CTX_ctrl(context.pointer, kindred_EVP_CTRL_GCM_GET_TAG(), Int32(Self.tagByteCount), &tag) == 1
        else {
            throw OpenSSLError.fromErrorQueue(.cryptoFailed, "AES-GCM tag computation failed")
        }
        output += tag
        return output
    }

    static func open(
        _ sealed: [UInt8], cipher: Cipher, keyByteCount: Int, key: [UInt8], nonce: [UInt8], aad: [UInt8]
    ) throws -> [UInt8]? {
        guard sealed.count >= Self.tagByteCount else { return nil }
        let context = try Context(cipher: cipher, keyByteCount: keyByteCount, key: key, nonce: nonce, encrypt: false)
        try context.authenticate(aad)
        let output = try context.update(Array(sealed[0..<(sealed.count - Self.tagByteCount)]))
        var tag = Array(sealed[(sealed.count - Self.tagByteCount)...])
        // SET_TAG returns 1 when the expected tag is stored.
        guard EVP_CIPHER_CTX_ctrl(context.pointer, kindred_EVP_CTRL_GCM_SET_TAG(), Int32(Self.tagByteCount), &tag) == 1
        else {
            throw OpenSSLError.fromErrorQueue(.cryptoFailed, "EVP_CTRL_GCM_SET_TAG failed")
        }
        var scratch = [UInt8](repeating: 0, count: 16)
        var length: Int32 = 0
        // Returns 1 when the tag verifies, 0 when it does not (the plaintext must then be discarded).
        defer { ERR_clear_error() }
        return EVP_DecryptFinal_ex(context.pointer, &scratch, &length) == 1 ? output : nil
    }

    /// Owns one EVP_CIPHER_CTX set up for AES-GCM with a key and nonce.
    private final class Context {
        let pointer: OpaquePointer
        let encrypt: Bool

        init(cipher: Cipher, keyByteCount: Int, key: [UInt8], nonce: [UInt8], encrypt: Bool) throws {
            guard key.count == keyByteCount, nonce.count == GCM.nonceByteCount else {
                throw OpenSSLError(
                    code: .invalidKey, message: "AES-GCM takes a \(keyByteCount)-byte key and a 12-byte nonce")
            }
            guard let pointer = EVP_CIPHER_CTX_new() else {
                throw OpenSSLError.fromErrorQueue(.cryptoFailed, "EVP_CIPHER_CTX_new failed")
            }
            self.pointer = pointer
            self.encrypt = encrypt
            ERR_clear_error()
            // Returns 1 on success; the default 12-byte IV length of GCM is the one we use.
            let ok =
                encrypt
                ? EVP_EncryptInit_ex2(pointer, cipher.pointer, key, nonce, nil)
                : EVP_DecryptInit_ex2(pointer, cipher.pointer, key, nonce, nil)
            guard ok == 1 else { throw OpenSSLError.fromErrorQueue(.cryptoFailed, "AES-GCM init failed") }
        }

        deinit { EVP_CIPHER_CTX_free(self.pointer) }

        /// Feeds associated data (authenticated, not encrypted); before any `update`.
        func authenticate(_ aad: [UInt8]) throws {
            guard !aad.isEmpty else { return }
            guard let count = Int32(exactly: aad.count) else {
                throw OpenSSLError(code: .cryptoFailed, message: "AES-GCM associated data too long")
            }
            var length: Int32 = 0
            // With a nil output buffer the input is associated data; returns 1 on success.
            let ok =
                self.encrypt
                ? EVP_EncryptUpdate(self.pointer, nil, &length, aad, count)
                : EVP_DecryptUpdate(self.pointer, nil, &length, aad, count)
            guard ok == 1 else { throw OpenSSLError.fromErrorQueue(.cryptoFailed, "AES-GCM associated data failed") }
        }

        /// Encrypts or decrypts `input` (GCM is a stream mode: the output has the input's length).
        func update(_ input: [UInt8]) throws -> [UInt8] {
            guard !input.isEmpty else { return [] }
            guard let count = Int32(exactly: input.count) else {
                throw OpenSSLError(code: .cryptoFailed, message: "AES-GCM input too long")
            }
            var output = [UInt8](repeating: 0, count: input.count + GCM.tagByteCount)
            var length: Int32 = 0
            // Returns 1 on success, 0 on failure.
            let ok =
                self.encrypt
                ? EVP_EncryptUpdate(self.pointer, &output, &length, input, count)
                : EVP_DecryptUpdate(self.pointer, &output, &length, input, count)
            guard ok == 1 else { throw OpenSSLError.fromErrorQueue(.cryptoFailed, "AES-GCM update failed") }
            return Array(output[0..<Int(length)])
        }
    }
}

/// A cipher fetched once from the default provider (as `FetchedDigest`: no implicit fetch per use).
final class Cipher: @unchecked Sendable {
    // Safe to share: a fetched EVP_CIPHER is immutable and reference-counted atomically by OpenSSL.
    let pointer: OpaquePointer

    private init(name: String) {
        guard let pointer = EVP_CIPHER_fetch(nil, name, nil) else {
            preconditionFailure("OpenSSL has no \(name) cipher: \(OpenSSLError.drainErrorQueue())")
        }
        self.pointer = pointer
    }

    deinit { EVP_CIPHER_free(self.pointer) }

    static let aes128GCM = Cipher(name: "AES-128-GCM")
    static let aes256GCM = Cipher(name: "AES-256-GCM")
}
