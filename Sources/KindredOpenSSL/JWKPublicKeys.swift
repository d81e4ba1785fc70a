internal import COpenSSL

/// An RSA public key from a JWK's `n` and `e`, to verify RS256 (RSASSA-PKCS1-v1_5 with SHA-256)
/// signatures, as on Google's and Apple's OIDC ID tokens.
public struct RSAPublicKey: Sendable {
    let key: EVPKey

    /// The modulus size in bits.
    public let modulusBitCount: Int

    /// - Parameters:
    ///   - modulus: `n`, unsigned big-endian (base64url-decoded from the JWK).
    ///   - exponent: `e`, unsigned big-endian (usually `[1, 0, 1]`).
    /// - Throws: ``OpenSSLError/Code/invalidKey`` for malformed components or a modulus outside
    ///   2048...16384 bits (RFC 7518 §3.3 requires at least 2048).
    public init(modulus: some Sequence<UInt8>, exponent: some Sequence<UInt8>) throws {
        let n = try BigNumber(modulus)
        let e = try BigNumber(exponent)
        let key = try buildPublicKey(algorithm: "RSA") { builder in
            // Returns 1 on success, 0 on allocation failure.
            kindred_OSSL_PARAM_BLD_push_rsa_public(builder, n.pointer, e.pointer)
        }
        // Both numbers must outlive OSSL_PARAM_BLD_to_param, which ran inside buildPublicKey.
        withExtendedLifetime((n, e)) {}
        let bits = key.withUnsafePointer { Int(EVP_PKEY_get_bits($0)) }
        guard bits >= 2048, bits <= 16384 else {
            throw OpenSSLError(code: .invalidKey, message: "RSA modulus must have 2048 to 16384 bits")
        }
        self.key = key
        self.modulusBitCount = bits
    }

    /// Whether `signature` is a valid RS256 signature of `message` (for a JWT: the ASCII bytes of
    /// `header.payload`).
    public func isValidRS256Signature(_ signature: some Sequence<UInt8>, for message: some Sequence<UInt8>) -> Bool {
        self.key.verify(signature, for: message, digest: FetchedDigest.sha256)
    }
}

/// A P-256 public key from a JWK's `x` and `y`, to verify ES256 (ECDSA P-256 with SHA-256)
/// signatures.
public struct P256PublicKey: Sendable {
    let key: EVPKey

    /// - Parameters: `x` and `y`, 32 bytes each, unsigned big-endian (base64url-decoded from the JWK).
    /// - Throws: ``OpenSSLError/Code/invalidKey`` if the lengths are wrong or the point is not on the curve.
    public init(x: some Sequence<UInt8>, y: some Sequence<UInt8>) throws {
        let x = Array(x)
        let y = Array(y)
        guard x.count == 32, y.count == 32 else {
            throw OpenSSLError(code: .invalidKey, message: "P-256 coordinates are 32 bytes each")
        }
        let point = [0x04] + x + y  // SEC 1 uncompressed point
        self.key = try point.withUnsafeBufferPointer { point in
            try buildPublicKey(algorithm: "EC") { builder in
                kindred_OSSL_PARAM_BLD_push_p256_public(builder, point.baseAddress, point.count)
            }
        }
    }

    /// A key from an uncompressed SEC 1 point (65 bytes, `04 ‖ x ‖ y`), as a Web Push subscription's `p256dh`.
    /// - Throws: ``OpenSSLError/Code/invalidKey`` if it is not such a point on the curve.
    public init(uncompressedPoint point: some Sequence<UInt8>) throws {
        let point = Array(point)
        guard point.count == 65, point[0] == 0x04 else {
            throw OpenSSLError(code: .invalidKey, message: "a P-256 point is 65 bytes starting with 04")
        }
        try self.init(x: point[1..<33], y: point[33..<65])
    }

    /// The uncompressed SEC 1 point (65 bytes).
    public func uncompressedPoint() throws -> [UInt8] {
        try self.key.publicPoint()
    }

    /// Whether `signature`, in JWS form (r ‖ s, 64 bytes), is a valid ES256 signature of `message`.
    public func isValidES256Signature(_ signature: some Sequence<UInt8>, for message: some Sequence<UInt8>) -> Bool {
        let raw = Array(signature)
        guard raw.count == 64, let der = derECDSASignature(r: raw[0..<32], s: raw[32..<64]) else { return false }
        return self.key.verify(der, for: message, digest: FetchedDigest.sha256)
    }
}

/// Owns a `BIGNUM` made from unsigned big-endian bytes.
private final class BigNumber {
    let pointer: OpaquePointer

    init(_ bytes: some Sequence<UInt8>) throws {
        let bytes = Array(bytes)
        guard !bytes.isEmpty, bytes.count <= 2048 else {
            throw OpenSSLError(code: .invalidKey, message: "key component has an invalid length")
        }
        ERR_clear_error()
        // Returns NULL only on allocation failure.
        guard let pointer = BN_bin2bn(bytes, Int32(bytes.count), nil) else {
            throw OpenSSLError.fromErrorQueue(.cryptoFailed, "BN_bin2bn failed")
        }
        self.pointer = pointer
    }

    deinit { BN_free(self.pointer) }
}

/// Builds and checks a public key from the parameters `push` adds to a fresh OSSL_PARAM builder.
private func buildPublicKey(algorithm: String, push: (OpaquePointer) -> Int32) throws -> EVPKey {
    guard let builder = OSSL_PARAM_BLD_new() else {
        throw OpenSSLError.fromErrorQueue(.cryptoFailed, "OSSL_PARAM_BLD_new failed")
    }
    defer { OSSL_PARAM_BLD_free(builder) }
    ERR_clear_error()
    guard push(builder) == 1 else {
        throw OpenSSLError.fromErrorQueue(.cryptoFailed, "OSSL_PARAM_BLD_push failed")
    }
    guard let parameters = OSSL_PARAM_BLD_to_param(builder) else {
        throw OpenSSLError.fromErrorQueue(.cryptoFailed, "OSSL_PARAM_BLD_to_param failed")
    }
    defer { OSSL_PARAM_free(parameters) }
    return try EVPKey.publicKey(algorithm: algorithm, parameters: parameters)
}

/// Converts JWS's fixed-width r ‖ s into the DER `ECDSA-Sig-Value` that `EVP_DigestVerify` expects.
private func derECDSASignature(r: ArraySlice<UInt8>, s: ArraySlice<UInt8>) -> [UInt8]? {
    guard let signature = ECDSA_SIG_new() else { return nil }
    defer { ECDSA_SIG_free(signature) }
    let rNumber = r.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
    let sNumber = s.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
    // ECDSA_SIG_set0 takes ownership of both numbers on success only.
    guard let rNumber, let sNumber, ECDSA_SIG_set0(signature, rNumber, sNumber) == 1 else {
        BN_free(rNumber)
        BN_free(sNumber)
        return nil
    }
    // i2d returns the encoded length (0 or negative on error); with a NULL output it only measures.
    let length = i2d_ECDSA_SIG(signature, nil)
    guard length > 0 else { return nil }
    var der = [UInt8](repeating: 0, count: Int(length))
    let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
        var cursor = buffer.baseAddress
        return i2d_ECDSA_SIG(signature, &cursor)
    }
    return written == length ? der : nil
}
