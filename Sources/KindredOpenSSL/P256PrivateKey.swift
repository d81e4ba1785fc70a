internal import COpenSSL

/// An ECDSA P-256 signing key, to sign ES256 JWTs (RFC 7518 §3.4), as Apple's push service asks of providers
/// (the team's `.p8` key).
public struct P256PrivateKey: Sendable, CustomStringConvertible {
    let key: EVPKey

    /// A key from unencrypted PKCS#8 PEM text (`-----BEGIN PRIVATE KEY-----`, the form of an APNs `.p8` file) or
    /// SEC 1 (`-----BEGIN EC PRIVATE KEY-----`).
    public init(pemRepresentation: String) throws {
        self.key = try Self.checked(EVPKey.fromPEM(pemRepresentation.utf8, private: true), file: nil)
    }

    /// A key from a PEM file. Errors name the file, never its contents.
    public init(pemFile path: String) throws {
        let pem = try readFile(path, code: .invalidKey)
        self.key = try Self.checked(EVPKey.fromPEM(pem, private: true, file: path), file: path)
    }

    private static func checked(_ key: EVPKey, file: String?) throws -> EVPKey {
        let bits = key.withUnsafePointer { Int(EVP_PKEY_get_bits($0)) }
        guard key.isA("EC"), bits == 256 else {
            throw OpenSSLError(code: .invalidKey, message: "the PEM key is not a P-256 EC key", file: file)
        }
        return key
    }

    /// The ES256 signature of `message` in JWS form: r ‖ s, 32 bytes each (not DER).
    public func signES256(_ message: some Sequence<UInt8>) throws -> [UInt8] {
        let der = try self.key.sign(message, digest: FetchedDigest.sha256)
        return try rawECDSASignature(der: der)
    }

    /// The public key as an uncompressed SEC 1 point (65 bytes, `04 ‖ x ‖ y`): what a VAPID `k=` parameter and
    /// a browser's `applicationServerKey` carry.
    public func publicKeyBytes() throws -> [UInt8] {
        try self.key.publicPoint()
    }

    public var description: String { "P256PrivateKey(<redacted>)" }
}

/// Converts the DER `ECDSA-Sig-Value` that `EVP_DigestSign` produces into JWS's fixed-width r ‖ s.
private func rawECDSASignature(der: [UInt8]) throws -> [UInt8] {
    let decoded = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
        var cursor = buffer.baseAddress
        // Returns the decoded signature, or NULL for malformed DER (cannot happen for OpenSSL's own output).
        return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
    }
    guard let signature = decoded else {
        throw OpenSSLError.fromErrorQueue(.cryptoFailed, "d2i_ECDSA_SIG failed")
    }
    defer { ECDSA_SIG_free(signature) }
    var raw = [UInt8](repeating: 0, count: 64)
    // The numbers belong to the signature; BN_bn2binpad returns the padded length, or -1 if the number is wider.
    let r = raw.withUnsafeMutableBufferPointer { BN_bn2binpad(ECDSA_SIG_get0_r(signature), $0.baseAddress, 32) }
    let s = raw.withUnsafeMutableBufferPointer { BN_bn2binpad(ECDSA_SIG_get0_s(signature), $0.baseAddress! + 32, 32) }
    guard r == 32, s == 32 else {
        throw OpenSSLError(code: .cryptoFailed, message: "ECDSA signature component wider than 32 bytes")
    }
    return raw
}
