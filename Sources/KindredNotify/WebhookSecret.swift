import Foundation
import KindredOpenSSL

/// A webhook signing secret: 32 random bytes, shown to the admin once as `whsec_` + base64 (the Standard Webhooks
/// form, which the `standardwebhooks` libraries take as is), stored as the bytes.
struct WebhookSecret: Sendable, Equatable {
    static let prefix = "whsec_"
    static let byteCount = 32

    let key: [UInt8]

    init(key: [UInt8]) { self.key = key }

    /// A fresh secret from the CSPRNG.
    static func generate() throws -> WebhookSecret {
        WebhookSecret(key: try SecureRandom.bytes(count: Self.byteCount))
    }

    /// `whsec_<base64>`.
    var text: String { Self.prefix + Data(self.key).base64EncodedString() }

    /// The secret of `whsec_<base64>` (24..64 bytes), or nil.
    init?(text: String) {
        guard text.hasPrefix(Self.prefix), let bytes = Data(base64Encoded: String(text.dropFirst(Self.prefix.count))),
            (24...64).contains(bytes.count)
        else { return nil }
        self.key = Array(bytes)
    }
}

/// The `webhook-signature` header of the Standard Webhooks spec: for each secret still signing,
/// `v1,<base64 of HMAC-SHA256(secret, "<id>.<timestamp>.<body>")>`, space-separated (the current secret first,
/// then the previous one during its grace period after a rotation).
enum WebhookSignature {
    static func header(id: String, timestamp: Int64, body: [UInt8], secrets: [WebhookSecret]) -> String {
        let signed = Array("\(id).\(timestamp).".utf8) + body
        return secrets.map { secret in
            "v1," + Data(HMACSHA256.authenticationCode(for: signed, key: secret.key)).base64EncodedString()
        }.joined(separator: " ")
    }
}
