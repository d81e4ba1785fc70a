import KindredOpenSSL

/// Message encryption for Web Push (RFC 8291) in the `aes128gcm` content coding (RFC 8188): only the browser
/// holding the subscription's private key and auth secret can read a push; the push service sees its length, which
/// padding rounds up.
///
/// The body is one record: header `salt(16) ‖ rs(4) ‖ idlen(1) ‖ keyid` (the keyid is the sender's ephemeral
/// public key), then AES-128-GCM of `plaintext ‖ 0x02 ‖ zero padding`, with keys from HKDF-SHA-256 over the ECDH
/// secret and the auth secret.
enum WebPushEncryption {
    /// Push services must accept bodies of 4096 bytes (RFC 8291 §4); nothing larger is sent.
    static let maximumBodyByteCount = 4096
    static let headerByteCount = 16 + 4 + 1 + 65
    /// The most plaintext one push can carry: the body limit minus header, delimiter and tag.
    static let maximumPlaintextByteCount = Self.maximumBodyByteCount - Self.headerByteCount - 1 - AES128GCM.tagByteCount
    /// The record size announced in the header: the whole message fits one record (RFC 8291 §4).
    static let recordSize: UInt32 = 4096

    enum Failure: Error, Equatable {
        /// The subscription's p256dh is not a P-256 point or its auth secret is not 16 bytes.
        case invalidSubscriptionKeys
        /// The plaintext does not fit in one push.
        case tooLarge
    }

    /// Encrypts `plaintext` for the subscription (`p256dh`, `authSecret` as the browser gave them, decoded),
    /// padded with zeros to a multiple of `paddingBlock` bytes (capped at the size limit).
    /// - Parameters:
    ///   - ephemeralKey: the sender's key pair; nil for a fresh one (tests pass RFC 8291's to reproduce its body).
    ///   - salt: 16 random bytes; nil for fresh ones.
    static func encrypt(
        _ plaintext: [UInt8],
        p256dh: [UInt8],
        authSecret: [UInt8],
        paddingBlock: Int = 1,
        ephemeralKey: P256KeyAgreementKey? = nil,
        salt: [UInt8]? = nil
    ) throws -> [UInt8] {
        guard plaintext.count <= Self.maximumPlaintextByteCount else { throw Failure.tooLarge }
        guard authSecret.count == 16, let receiver = try? P256PublicKey(uncompressedPoint: p256dh) else {
            throw Failure.invalidSubscriptionKeys
        }
        let sender = try ephemeralKey ?? P256KeyAgreementKey()
        let senderPublic = try sender.publicKeyBytes()
        let salt = try salt ?? SecureRandom.bytes(count: 16)
        precondition(salt.count == 16 && senderPublic.count == 65, "RFC 8291 salt and key sizes")
        guard let secret = try? sender.sharedSecret(with: receiver) else { throw Failure.invalidSubscriptionKeys }

        // RFC 8291 §3.3-3.4: the input keying material mixes the ECDH secret with the auth secret and both keys.
        let keyInfo = Array("WebPush: info\0".utf8) + p256dh + senderPublic
        let ikm = HKDFSHA256.deriveKey(inputKeyMaterial: secret, salt: authSecret, info: keyInfo, byteCount: 32)
        // RFC 8188 §2.2-2.3: content-encryption key and nonce from the salt (one record, sequence number 0).
        let key = HKDFSHA256.deriveKey(
            inputKeyMaterial: ikm, salt: salt, info: Array("Content-Encoding: aes128gcm\0".utf8), byteCount: 16)
        let nonce = HKDFSHA256.deriveKey(
            inputKeyMaterial: ikm, salt: salt, info: Array("Content-Encoding: nonce\0".utf8), byteCount: 12)

        var record = plaintext
        record.append(0x02)  // the delimiter of the last (only) record
        let block = max(1, paddingBlock)
        let padded = min((plaintext.count + block - 1) / block * block, Self.maximumPlaintextByteCount)
        if padded > plaintext.count { record += [UInt8](repeating: 0, count: padded - plaintext.count) }

        var body = salt
        body += withUnsafeBytes(of: Self.recordSize.bigEndian, Array.init)
        body.append(UInt8(senderPublic.count))
        body += senderPublic
        body += try AES128GCM.seal(record, key: key, nonce: nonce)
        return body
    }
}
