/// AES-256 in Galois/Counter Mode (NIST SP 800-38D) with a 96-bit nonce, a 128-bit tag and associated data
/// (authenticated, not encrypted: what binds a sealed value to where it is stored): secrets sealed at rest.
public enum AES256GCM {
    public static let keyByteCount = 32
    public static let nonceByteCount = 12
    public static let tagByteCount = 16

    /// `plaintext` encrypted under `key` and `nonce` with `aad`, followed by the 16-byte tag.
    public static func seal(_ plaintext: some Sequence<UInt8>, key: [UInt8], nonce: [UInt8], aad: [UInt8] = [])
        throws -> [UInt8]
    {
        try GCM.seal(Array(plaintext), cipher: .aes256GCM, keyByteCount: Self.keyByteCount, key: key, nonce: nonce, aad: aad)
    }

    /// The plaintext of `sealed` (ciphertext ‖ tag), or nil when the tag does not verify (altered, other key,
    /// other associated data).
    public static func open(_ sealed: some Sequence<UInt8>, key: [UInt8], nonce: [UInt8], aad: [UInt8] = [])
        throws -> [UInt8]?
    {
        try GCM.open(Array(sealed), cipher: .aes256GCM, keyByteCount: Self.keyByteCount, key: key, nonce: nonce, aad: aad)
    }
}
