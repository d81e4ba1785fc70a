internal import COpenSSL

/// Random bytes from OpenSSL's CSPRNG (`RAND_bytes`).
public enum SecureRandom {
    /// `count` cryptographically secure random bytes, e.g. 32 for an opaque refresh token.
    /// - Throws: ``OpenSSLError/Code/randomFailed`` if the generator is not seeded or fails.
    public static func bytes(count: Int) throws -> [UInt8] {
        precondition(count >= 0, "negative byte count")
        guard count > 0 else { return [] }
        guard let length = Int32(exactly: count) else {
            throw OpenSSLError(code: .randomFailed, message: "too many random bytes requested at once")
        }
        var bytes = [UInt8](repeating: 0, count: count)
        ERR_clear_error()
        // Returns 1 on success, 0 or -1 when the DRBG cannot produce output.
        guard RAND_bytes(&bytes, length) == 1 else {
            throw OpenSSLError.fromErrorQueue(.randomFailed, "RAND_bytes failed")
        }
        return bytes
    }
}

/// SHA-256 (FIPS 180-4).
public enum SHA256 {
    public static let byteCount = 32

    /// The 32-byte digest of `message`.
    public static func hash(_ message: some Sequence<UInt8>) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Self.byteCount)
        var length: UInt32 = 0
        let ok = withContiguousBytes(message) { message in
            // Returns 1, or 0 only if OpenSSL cannot allocate a context.
            EVP_Digest(message.baseAddress, message.count, &digest, &length, FetchedDigest.sha256.pointer, nil)
        }
        guard ok == 1, length == Self.byteCount else {
            preconditionFailure("EVP_Digest(SHA-256) failed: \(OpenSSLError.drainErrorQueue())")
        }
        return digest
    }
}

/// HMAC-SHA-256 (RFC 2104).
public enum HMACSHA256 {
    public static let byteCount = 32

    /// The 32-byte authentication code of `message` under `key`.
    public static func authenticationCode(for message: some Sequence<UInt8>, key: some Sequence<UInt8>) -> [UInt8] {
        var code = [UInt8](repeating: 0, count: Self.byteCount)
        var length: UInt32 = 0
        let result = withContiguousBytes(key) { key in
            withContiguousBytes(message) { message in
                // Returns the output pointer, or NULL if OpenSSL cannot allocate a context.
                HMAC(
                    FetchedDigest.sha256.pointer,
                    key.baseAddress,
                    Int32(key.count),
                    message.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    message.count,
                    &code,
                    &length
                )
            }
        }
        guard result != nil, length == Self.byteCount else {
            preconditionFailure("HMAC-SHA-256 failed: \(OpenSSLError.drainErrorQueue())")
        }
        return code
    }

    /// Whether `code` is the authentication code of `message` under `key`, compared in constant time.
    public static func isValidAuthenticationCode(
        _ code: some Sequence<UInt8>,
        for message: some Sequence<UInt8>,
        key: some Sequence<UInt8>
    ) -> Bool {
        ConstantTime.equals(code, Self.authenticationCode(for: message, key: key))
    }
}

/// Comparisons whose running time does not depend on where the inputs differ.
public enum ConstantTime {
    /// Whether `a` and `b` hold the same bytes. The lengths are not secret: inputs of different
    /// length return `false` at once; equal lengths are compared with `CRYPTO_memcmp`.
    public static func equals(_ a: some Sequence<UInt8>, _ b: some Sequence<UInt8>) -> Bool {
        withContiguousBytes(a) { a in
            withContiguousBytes(b) { b in
                a.count == b.count && CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0
            }
        }
    }
}

/// A message digest fetched once from the default provider: OpenSSL 3's `EVP_sha256()` performs an
/// implicit fetch (a locked lookup) on every use, a pre-fetched `EVP_MD` does not.
final class FetchedDigest: @unchecked Sendable {
    // Safe to share: a fetched EVP_MD is immutable and reference-counted atomically by OpenSSL.
    let pointer: OpaquePointer

    private init(name: String) {
        guard let pointer = EVP_MD_fetch(nil, name, nil) else {
            preconditionFailure("OpenSSL has no \(name) digest: \(OpenSSLError.drainErrorQueue())")
        }
        self.pointer = pointer
    }

    deinit { EVP_MD_free(self.pointer) }

    static let sha256 = FetchedDigest(name: "SHA256")
}
