import KindredOpenSSL
import Testing

@testable import KindredPush

/// RFC 8291 message encryption, byte for byte against the RFC's own example (Appendix A), and read back the way a
/// browser does (RFC 8188 decryption written here from the RFC, over the same primitives).
@Suite("Web Push message encryption (RFC 8291)")
struct WebPushEncryptionTests {
    static let plaintext = Array("When I grow up, I want to be a watermelon".utf8)
    static let asPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
    static let asPublic = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let uaPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
    static let uaPublic = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
    static let auth = "BTBZMqHH6r4Tts7J_aSIgg"
    static let body =
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"

    static func bytes(_ text: String) -> [UInt8] { Base64URL.decode(text)! }

    @Test("with the RFC's sender key and salt the body is exactly RFC 8291 Appendix A's")
    func rfc8291Example() throws {
        let body = try WebPushEncryption.encrypt(
            Self.plaintext, p256dh: Self.bytes(Self.uaPublic), authSecret: Self.bytes(Self.auth),
            ephemeralKey: P256KeyAgreementKey(privateKey: Self.bytes(Self.asPrivate), publicKey: Self.bytes(Self.asPublic)),
            salt: Self.bytes(Self.salt))
        #expect(Base64URL.encode(body) == Self.body)
    }

    /// The user agent's side (RFC 8291 §3.4, RFC 8188 §2): the plaintext and the padding length.
    static func decrypt(_ body: [UInt8], uaKey: P256KeyAgreementKey, auth: [UInt8]) throws -> (text: [UInt8], padding: Int)? {
        let salt = Array(body[0..<16])
        let idlen = Int(body[20])
        let senderPublic = Array(body[21..<(21 + idlen)])
        let secret = try uaKey.sharedSecret(with: P256PublicKey(uncompressedPoint: senderPublic))
        let ikm = HKDFSHA256.deriveKey(
            inputKeyMaterial: secret, salt: auth,
            info: Array("WebPush: info\0".utf8) + (try uaKey.publicKeyBytes()) + senderPublic, byteCount: 32)
        let key = HKDFSHA256.deriveKey(
            inputKeyMaterial: ikm, salt: salt, info: Array("Content-Encoding: aes128gcm\0".utf8), byteCount: 16)
        let nonce = HKDFSHA256.deriveKey(
            inputKeyMaterial: ikm, salt: salt, info: Array("Content-Encoding: nonce\0".utf8), byteCount: 12)
        guard var record = try AES128GCM.open(body[(21 + idlen)...], key: key, nonce: nonce) else { return nil }
        var padding = 0
        while record.last == 0 {
            record.removeLast()
            padding += 1
        }
        guard record.last == 0x02 else { return nil }
        record.removeLast()
        return (record, padding)
    }

    @Test("the user agent reads a fresh message; it is padded to the block, and every message has its own key and salt")
    func roundTripWithPadding() throws {
        let receiver = try P256KeyAgreementKey()
        let auth = try SecureRandom.bytes(count: 16)
        let first = try WebPushEncryption.encrypt(
            Self.plaintext, p256dh: try receiver.publicKeyBytes(), authSecret: auth, paddingBlock: 128)
        let second = try WebPushEncryption.encrypt(
            Self.plaintext, p256dh: try receiver.publicKeyBytes(), authSecret: auth, paddingBlock: 128)
        #expect(first.count == 86 + 128 + 1 + 16)
        #expect(first[0..<16] != second[0..<16])
        #expect(first[21..<86] != second[21..<86])
        let read = try #require(try Self.decrypt(first, uaKey: receiver, auth: auth))
        #expect(read.text == Self.plaintext)
        #expect(read.padding == 128 - Self.plaintext.count)
        #expect(try Self.decrypt(first, uaKey: receiver, auth: SecureRandom.bytes(count: 16)) == nil)
    }

    @Test("bad subscription keys and a plaintext that cannot fit one push are refused")
    func refusals() throws {
        let receiver = try P256KeyAgreementKey()
        let p256dh = try receiver.publicKeyBytes()
        #expect(throws: WebPushEncryption.Failure.invalidSubscriptionKeys) {
            try WebPushEncryption.encrypt(Self.plaintext, p256dh: Array(p256dh.dropLast()), authSecret: Array(repeating: 1, count: 16))
        }
        #expect(throws: WebPushEncryption.Failure.invalidSubscriptionKeys) {
            try WebPushEncryption.encrypt(Self.plaintext, p256dh: p256dh, authSecret: Array(repeating: 1, count: 15))
        }
        let largest = [UInt8](repeating: 0x41, count: WebPushEncryption.maximumPlaintextByteCount)
        let body = try WebPushEncryption.encrypt(largest, p256dh: p256dh, authSecret: Array(repeating: 1, count: 16), paddingBlock: 128)
        #expect(body.count == WebPushEncryption.maximumBodyByteCount)
        #expect(throws: WebPushEncryption.Failure.tooLarge) {
            try WebPushEncryption.encrypt(largest + [0x41], p256dh: p256dh, authSecret: Array(repeating: 1, count: 16))
        }
    }

    @Test("collapse keys become RFC 8030 topics: kept when they fit, else a stable 32-character hash")
    func topics() {
        #expect(WebPushTopic.from("thread-42_a") == "thread-42_a")
        let hashed = WebPushTopic.from("thread:0b7c5e3e-9f6f-4f0e-8f1f-000000000042")
        #expect(hashed.count == 32)
        #expect(hashed == WebPushTopic.from("thread:0b7c5e3e-9f6f-4f0e-8f1f-000000000042"))
        #expect(hashed != WebPushTopic.from("thread:0b7c5e3e-9f6f-4f0e-8f1f-000000000043"))
        #expect(WebPushTopic.from(String(repeating: "a", count: 33)).count == 32)
    }
}
