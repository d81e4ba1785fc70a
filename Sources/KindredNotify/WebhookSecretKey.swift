import KindredOpenSSL

/// The key that seals webhook signing secrets at rest (`KINDRED_NOTIFY_WEBHOOK_KEY`, or `_FILE`): AES-256-GCM
/// under a key derived from the setting with HKDF-SHA256, a fresh nonce per value, and the endpoint's id as
/// associated data (a sealed secret copied to another endpoint's row does not open). A sealed value is
/// `1 ‖ nonce (12) ‖ ciphertext ‖ tag (16)`. The database alone (a dump, a backup, a replica) does not give the
/// secrets away; the key lives with the deployment's other secrets.
public struct WebhookSecretKey: Sendable {
    private let key: [UInt8]

    static let version: UInt8 = 1
    static let info = Array("kindred notify webhook secrets v1".utf8)

    /// Raised when a sealed secret does not open: another key, or an altered value.
    struct WrongKey: Error {}

    /// The key of `text`, the setting's value (at least 32 characters of random material).
    public init(text: String) {
        self.key = HKDFSHA256.deriveKey(
            inputKeyMaterial: Array(text.utf8), salt: [UInt8](), info: Self.info, byteCount: AES256GCM.keyByteCount)
    }

    /// `secret` sealed for the endpoint `endpointID`.
    func seal(_ secret: WebhookSecret, endpoint endpointID: String) throws -> [UInt8] {
        let nonce = try SecureRandom.bytes(count: AES256GCM.nonceByteCount)
        return [Self.version] + nonce
            + (try AES256GCM.seal(secret.key, key: self.key, nonce: nonce, aad: Self.aad(endpointID)))
    }

    /// The secret of a value `seal` made for `endpointID`; throws `WrongKey` when it does not open.
    func open(_ sealed: [UInt8], endpoint endpointID: String) throws -> WebhookSecret {
        let header = 1 + AES256GCM.nonceByteCount
        guard sealed.count > header + AES256GCM.tagByteCount, sealed[0] == Self.version,
            let key = try AES256GCM.open(
                sealed[header...], key: self.key, nonce: Array(sealed[1..<header]), aad: Self.aad(endpointID))
        else { throw WrongKey() }
        return WebhookSecret(key: key)
    }

    private static func aad(_ endpointID: String) -> [UInt8] { Array("webhook-endpoint:\(endpointID.lowercased())".utf8) }
}
