internal import COpenSSL

/// HKDF with HMAC-SHA-256 (RFC 5869): extract a pseudorandom key from `inputKeyMaterial` and `salt`, then expand
/// it with `info` into `byteCount` bytes. OpenSSL's EVP_KDF "HKDF".
public enum HKDFSHA256 {
    /// RFC 5869 allows at most 255 blocks of output.
    public static let maximumByteCount = 255 * 32

    public static func deriveKey(
        inputKeyMaterial: some Sequence<UInt8>,
        salt: some Sequence<UInt8>,
        info: some Sequence<UInt8>,
        byteCount: Int
    ) -> [UInt8] {
        precondition((1...Self.maximumByteCount).contains(byteCount), "HKDF output length out of range")
        var output = [UInt8](repeating: 0, count: byteCount)
        let result = withContiguousBytes(inputKeyMaterial) { key in
            withContiguousBytes(salt) { salt in
                withContiguousBytes(info) { info in
                    // Returns 1 on success; 0 only when OpenSSL cannot allocate or lacks the KDF.
                    kindred_HKDF_SHA256(
                        &output, byteCount,
                        key.baseAddress?.assumingMemoryBound(to: UInt8.self), key.count,
                        salt.baseAddress?.assumingMemoryBound(to: UInt8.self), salt.count,
                        info.baseAddress?.assumingMemoryBound(to: UInt8.self), info.count
                    )
                }
            }
        }
        guard result == 1 else { preconditionFailure("HKDF-SHA-256 failed: \(OpenSSLError.drainErrorQueue())") }
        return output
    }
}
