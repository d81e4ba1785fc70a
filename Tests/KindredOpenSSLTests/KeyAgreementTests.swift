import KindredOpenSSL
import Testing

/// The primitives of Web Push message encryption (RFC 8291): ECDH on P-256, HKDF-SHA-256 and AES-128-GCM, each
/// against published values. The whole RFC 8291 example is reproduced in KindredPushTests/WebPushEncryptionTests.
@Suite("ECDH P-256, HKDF-SHA-256, AES-128-GCM")
struct KeyAgreementTests {
    /// RFC 8291 Appendix A's key pairs (base64url) and the ECDH secret it derives from them.
    static let asPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
    static let asPublic = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let uaPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
    static let uaPublic = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let ecdhSecret = "kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs"

    static func bytes(_ text: String) -> [UInt8] { Base64URL.decode(text)! }

    @Test("RFC 8291's application server key and user agent key agree on the RFC's ECDH secret, from both sides")
    func rfc8291SharedSecret() throws {
        let sender = try P256KeyAgreementKey(privateKey: Self.bytes(Self.asPrivate), publicKey: Self.bytes(Self.asPublic))
        let receiver = try P256KeyAgreementKey(privateKey: Self.bytes(Self.uaPrivate), publicKey: Self.bytes(Self.uaPublic))
        #expect(try sender.publicKeyBytes() == Self.bytes(Self.asPublic))
        let forward = try sender.sharedSecret(with: P256PublicKey(uncompressedPoint: Self.bytes(Self.uaPublic)))
        let backward = try receiver.sharedSecret(with: P256PublicKey(uncompressedPoint: Self.bytes(Self.asPublic)))
        #expect(forward == Self.bytes(Self.ecdhSecret))
        #expect(backward == forward)
    }

    @Test("a scalar with another key's point is refused; so is a point off the curve")
    func mismatchedKeysRefused() throws {
        #expect(throws: OpenSSLError.self) {
            try P256KeyAgreementKey(privateKey: Self.bytes(Self.asPrivate), publicKey: Self.bytes(Self.uaPublic))
        }
        var offCurve = Self.bytes(Self.uaPublic)
        offCurve[64] ^= 1
        #expect(throws: OpenSSLError.self) { try P256PublicKey(uncompressedPoint: offCurve) }
        #expect(throws: OpenSSLError.self) { try P256PublicKey(uncompressedPoint: Self.bytes(Self.asPrivate)) }
    }

    @Test("fresh key pairs: 65-byte uncompressed points, and two of them agree")
    func freshKeys() throws {
        let a = try P256KeyAgreementKey()
        let b = try P256KeyAgreementKey()
        let aPublic = try a.publicKeyBytes()
        #expect(aPublic.count == 65 && aPublic[0] == 0x04)
        #expect(aPublic != (try b.publicKeyBytes()))
        let ab = try a.sharedSecret(with: P256PublicKey(uncompressedPoint: try b.publicKeyBytes()))
        let ba = try b.sharedSecret(with: P256PublicKey(uncompressedPoint: aPublic))
        #expect(ab.count == 32 && ab == ba)
    }

    @Test("HKDF-SHA-256: RFC 5869 test case 1")
    func hkdf() {
        let okm = HKDFSHA256.deriveKey(
            inputKeyMaterial: [UInt8](repeating: 0x0b, count: 22), salt: Array(0x00...0x0c), info: Array(0xf0...0xf9),
            byteCount: 42)
        #expect(okm == hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"))
    }

    @Test("AES-128-GCM: the GCM specification's test case 2, and a changed byte fails the tag")
    func aesGCM() throws {
        let key = [UInt8](repeating: 0, count: 16)
        let nonce = [UInt8](repeating: 0, count: 12)
        let sealed = try AES128GCM.seal([UInt8](repeating: 0, count: 16), key: key, nonce: nonce)
        #expect(sealed == hex("0388dace60b6a392f328c2b971b2fe78ab6e47d42cec13bdf53a67b21257bddf"))
        #expect(try AES128GCM.seal([], key: key, nonce: nonce) == hex("58e2fccefa7e3061367f1d57a4e7455a"))
        #expect(try AES128GCM.open(sealed, key: key, nonce: nonce) == [UInt8](repeating: 0, count: 16))
        var altered = sealed
        altered[3] ^= 0x01
        #expect(try AES128GCM.open(altered, key: key, nonce: nonce) == nil)
        var otherKey = key
        otherKey[0] = 1
        #expect(try AES128GCM.open(sealed, key: otherKey, nonce: nonce) == nil)
    }

    @Test("AES-256-GCM: the GCM specification's test case 16 (with associated data); other data fails the tag")
    func aes256GCM() throws {
        let key = hex("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308")
        let nonce = hex("cafebabefacedbaddecaf888")
        let aad = hex("feedfacedeadbeeffeedfacedeadbeefabaddad2")
        let plaintext = hex(
            "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39")
        let sealed = try AES256GCM.seal(plaintext, key: key, nonce: nonce, aad: aad)
        #expect(
            sealed
                == hex(
                    "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662"
                        + "76fc6ece0f4e1768cddf8853bb2d551b"))
        #expect(try AES256GCM.open(sealed, key: key, nonce: nonce, aad: aad) == plaintext)
        #expect(try AES256GCM.open(sealed, key: key, nonce: nonce, aad: Array(aad.dropLast())) == nil)
        #expect(try AES256GCM.open(sealed, key: key, nonce: nonce) == nil)
    }
}
