internal import COpenSSL

/// A P-256 private key for ECDH key agreement (NIST SP 800-56A, as RFC 8291 uses it to encrypt Web Push messages):
/// usually a fresh key per message, or one built from known bytes to reproduce a published test vector.
public struct P256KeyAgreementKey: Sendable, CustomStringConvertible {
    let key: EVPKey

    /// A new random key pair (OpenSSL's CSPRNG).
    public init() throws {
        ERR_clear_error()
        // Returns the new key, or NULL when key generation fails (no provider, no entropy).
        guard let pointer = kindred_EVP_EC_gen_p256() else {
            throw OpenSSLError.fromErrorQueue(.cryptoFailed, "P-256 key generation failed")
        }
        self.key = EVPKey(takingOwnership: pointer)
    }

    /// A key from its scalar (32 bytes, big-endian) and its public point (65 bytes uncompressed), which OpenSSL
    /// checks belong together.
    /// - Throws: ``OpenSSLError/Code/invalidKey`` for bytes that do not form a P-256 key pair.
    public init(privateKey scalar: some Sequence<UInt8>, publicKey point: some Sequence<UInt8>) throws {
        let scalar = Array(scalar)
        let point = Array(point)
        guard scalar.count == 32, point.count == 65, point[0] == 0x04 else {
            throw OpenSSLError(code: .invalidKey, message: "a P-256 key pair is a 32-byte scalar and a 65-byte point")
        }
        // Returns NULL only on allocation failure.
        guard let number = BN_bin2bn(scalar, Int32(scalar.count), nil) else {
            throw OpenSSLError.fromErrorQueue(.cryptoFailed, "BN_bin2bn failed")
        }
        defer { BN_clear_free(number) }
        guard let builder = OSSL_PARAM_BLD_new() else {
            throw OpenSSLError.fromErrorQueue(.cryptoFailed, "OSSL_PARAM_BLD_new failed")
        }
        defer { OSSL_PARAM_BLD_free(builder) }
        ERR_clear_error()
        // Returns 1 on success, 0 on allocation failure.
        let pushed = point.withUnsafeBufferPointer {
            kindred_OSSL_PARAM_BLD_push_p256_keypair(builder, number, $0.baseAddress, $0.count)
        }
        guard pushed == 1, let parameters = OSSL_PARAM_BLD_to_param(builder) else {
            throw OpenSSLError.fromErrorQueue(.cryptoFailed, "OSSL_PARAM_BLD failed")
        }
        defer { OSSL_PARAM_free(parameters) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw OpenSSLError.fromErrorQueue(.cryptoFailed, "EVP_PKEY_CTX_new_from_name failed")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var pointer: OpaquePointer?
        // Each returns 1 on success, 0 or negative when the components are rejected.
        guard EVP_PKEY_fromdata_init(context) == 1,
            EVP_PKEY_fromdata(context, &pointer, kindred_EVP_PKEY_KEYPAIR(), parameters) == 1, let pointer
        else {
            throw OpenSSLError.fromErrorQueue(.invalidKey, "P-256 key pair rejected")
        }
        let key = EVPKey(takingOwnership: pointer)
        guard let check = EVP_PKEY_CTX_new_from_pkey(nil, pointer, nil) else {
            throw OpenSSLError.fromErrorQueue(.cryptoFailed, "EVP_PKEY_CTX_new_from_pkey failed")
        }
        defer { EVP_PKEY_CTX_free(check) }
        // Returns 1 when the scalar is in range and the point is the scalar's (EVP_PKEY_pairwise_check).
        guard EVP_PKEY_pairwise_check(check) == 1 else {
            throw OpenSSLError.fromErrorQueue(.invalidKey, "the public point is not the private key's")
        }
        self.key = key
    }

    /// The public point, uncompressed (65 bytes, `04 ‖ x ‖ y`).
    public func publicKeyBytes() throws -> [UInt8] {
        try self.key.publicPoint()
    }

    /// The shared secret with `peer`: the x coordinate of the product point (32 bytes).
    public func sharedSecret(with peer: P256PublicKey) throws -> [UInt8] {
        try self.key.withUnsafePointer { ownKey in
            try peer.key.withUnsafePointer { peerKey in
                guard let context = EVP_PKEY_CTX_new_from_pkey(nil, ownKey, nil) else {
                    throw OpenSSLError.fromErrorQueue(.cryptoFailed, "EVP_PKEY_CTX_new_from_pkey failed")
                }
                defer { EVP_PKEY_CTX_free(context) }
                ERR_clear_error()
                var length = 0
                // Each returns 1 on success, 0 or negative on failure (a peer key of another group).
                guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer(context, peerKey) == 1,
                    EVP_PKEY_derive(context, nil, &length) == 1
                else {
                    throw OpenSSLError.fromErrorQueue(.invalidKey, "ECDH with this peer key failed")
                }
                var secret = [UInt8](repeating: 0, count: length)
                guard EVP_PKEY_derive(context, &secret, &length) == 1 else {
                    throw OpenSSLError.fromErrorQueue(.cryptoFailed, "EVP_PKEY_derive failed")
                }
                return Array(secret[0..<length])
            }
        }
    }

    public var description: String { "P256KeyAgreementKey(<redacted>)" }
}
