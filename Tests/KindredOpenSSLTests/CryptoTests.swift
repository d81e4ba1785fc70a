import Foundation
import KindredOpenSSL
import Testing

@Suite("Digests, MACs and random bytes")
struct DigestTests {
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        ),
    ])
    func sha256(message: String, digest: String) {
        #expect(SHA256.hash(Array(message.utf8)) == hex(digest))
        #expect(SHA256.hash(message.utf8) == hex(digest))
    }

    @Test func sha256OfAMillionAs() {
        #expect(
            SHA256.hash([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000))
                == hex("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        )
    }

    /// RFC 4231 test cases 1, 2, 3, 4, 6 and 7 (case 5 tests truncation, which we do not offer).
    @Test(
        arguments: [
            (
                [UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8),
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
            ),
            (
                Array("Jefe".utf8), Array("what do ya want for nothing?".utf8),
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
            ),
            (
                [UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50),
                "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
            ),
            (
                Array(1...25), [UInt8](repeating: 0xcd, count: 50),
                "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"
            ),
            (
                [UInt8](repeating: 0xaa, count: 131),
                Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
            ),
            (
                [UInt8](repeating: 0xaa, count: 131),
                Array(
                    ("This is a test using a larger than block-size key and a larger than block-size data. "
                        + "The key needs to be hashed before being used by the HMAC algorithm.").utf8
                ),
                "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"
            ),
        ] as [([UInt8], [UInt8], String)]
    )
    func hmacSHA256(key: [UInt8], message: [UInt8], code: String) {
        #expect(HMACSHA256.authenticationCode(for: message, key: key) == hex(code))
        #expect(HMACSHA256.isValidAuthenticationCode(hex(code), for: message, key: key))
        var wrong = hex(code)
        wrong[31] ^= 1
        #expect(!HMACSHA256.isValidAuthenticationCode(wrong, for: message, key: key))
        #expect(!HMACSHA256.isValidAuthenticationCode(hex(code).dropLast(), for: message, key: key))
    }

    @Test func hmacWithEmptyKeyAndMessage() {
        // Python: hmac.new(b"", b"", hashlib.sha256).hexdigest()
        #expect(
            HMACSHA256.authenticationCode(for: [], key: [])
                == hex("b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
        )
    }

    @Test func constantTimeEquals() {
        #expect(ConstantTime.equals([1, 2, 3], [1, 2, 3]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2, 4]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2]))
        #expect(ConstantTime.equals([UInt8](), []))
    }

    @Test func secureRandom() throws {
        #expect(try SecureRandom.bytes(count: 0).isEmpty)
        let first = try SecureRandom.bytes(count: 32)
        let second = try SecureRandom.bytes(count: 32)
        #expect(first.count == 32)
        #expect(first != second)
    }
}

@Suite("Base64URL")
struct Base64URLTests {
    @Test(arguments: [
        ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"),
        ("foobar", "Zm9vYmFy"),
    ])
    func rfc4648Vectors(plain: String, encoded: String) {
        #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
        #expect(Base64URL.decode(encoded) == Array(plain.utf8))
    }

    @Test func urlSafeAlphabet() {
        #expect(Base64URL.encode([0xfb, 0xff, 0xbf]) == "-_-_")
        #expect(Base64URL.decode("-_-_") == [0xfb, 0xff, 0xbf])
    }

    @Test(arguments: ["Zg==", "Z", "Zh", "Zm9v+", "Zm9/", "Zm 9v", "Zm9v\n", "é"])
    func rejectsNonCanonicalInput(text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test func roundTripsRandomBytes() throws {
        for count in 0..<70 {
            let bytes = try SecureRandom.bytes(count: count)
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
    }
}

@Suite("Signatures")
struct SignatureTests {
    /// RFC 8032 §7.1 tests 1 and 2.
    @Test(arguments: [
        (
            "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
            "",
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
        ),
        (
            "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
            "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
            "72",
            "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"
        ),
    ])
    func ed25519RFC8032(seed: String, publicKey: String, message: String, signature: String) throws {
        let key = try Ed25519PrivateKey(rawRepresentation: hex(seed))
        #expect(key.publicKey.rawRepresentation == hex(publicKey))
        #expect(try key.sign(hex(message)) == hex(signature))
        let verifier = try Ed25519PublicKey(rawRepresentation: hex(publicKey))
        #expect(verifier.isValidSignature(hex(signature), for: hex(message)))
        for bit in [0, 100, 511] {
            var flipped = hex(signature)
            flipped[bit / 8] ^= 1 << (bit % 8)
            #expect(!verifier.isValidSignature(flipped, for: hex(message)))
        }
        #expect(!verifier.isValidSignature(hex(signature), for: hex(message) + [0]))
        #expect(!verifier.isValidSignature(hex(signature).dropLast(), for: hex(message)))
    }

    @Test func ed25519GeneratedKeyRoundTripsThroughPEM() throws {
        let key = try Ed25519PrivateKey()
        let pem = try key.pemRepresentation
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        #expect(!"\(key)".contains(pem.split(separator: "\n")[1]))
        let reloaded = try Ed25519PrivateKey(pemRepresentation: pem)
        #expect(reloaded.publicKey == key.publicKey)
        let publicPEM = try key.publicKey.pemRepresentation
        let message = Array("header.payload".utf8)
        let signature = try reloaded.sign(message)
        #expect(try Ed25519PublicKey(pemRepresentation: publicPEM).isValidSignature(signature, for: message))
    }

    @Test func ed25519InteropWithOpenSSLCLI() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try runChecked(["openssl", "genpkey", "-algorithm", "ed25519", "-out", "ed.key"], in: directory)
        try runChecked(["openssl", "pkey", "-in", "ed.key", "-pubout", "-out", "ed.pub"], in: directory)
        let message = Array("kindred access token".utf8)
        try Data(message).write(to: URL(fileURLWithPath: directory + "/message"))

        // Ours signs, the CLI verifies.
        let key = try Ed25519PrivateKey(pemFile: directory + "/ed.key")
        try Data(try key.sign(message)).write(to: URL(fileURLWithPath: directory + "/ours.sig"))
        let verified = try runChecked(
            [
                "openssl", "pkeyutl", "-verify", "-pubin", "-inkey", "ed.pub", "-rawin", "-in", "message", "-sigfile",
                "ours.sig",
            ],
            in: directory
        )
        #expect(verified.contains("Signature Verified Successfully"))

        // The CLI signs, ours verifies.
        try runChecked(
            ["openssl", "pkeyutl", "-sign", "-inkey", "ed.key", "-rawin", "-in", "message", "-out", "cli.sig"],
            in: directory
        )
        let signature = [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/cli.sig")))
        let publicKey = try Ed25519PublicKey(
            pemRepresentation: String(contentsOfFile: directory + "/ed.pub", encoding: .utf8)
        )
        #expect(publicKey == key.publicKey)
        #expect(publicKey.isValidSignature(signature, for: message))
    }

    @Test func ed25519RejectsOtherKeysAndBadInput() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try runChecked(
            ["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "ec.key"],
            in: directory
        )
        #expect(throws: OpenSSLError.self) { try Ed25519PrivateKey(pemFile: directory + "/ec.key") }
        #expect(throws: OpenSSLError.self) { try Ed25519PrivateKey(pemFile: directory + "/missing.key") }
        #expect(throws: OpenSSLError.self) { try Ed25519PrivateKey(pemRepresentation: "not pem") }
        #expect(throws: OpenSSLError.self) {
            try Ed25519PrivateKey(rawRepresentation: [UInt8](repeating: 1, count: 31))
        }
        #expect(throws: OpenSSLError.self) { try Ed25519PublicKey(rawRepresentation: [UInt8](repeating: 1, count: 33)) }
    }

    @Test func rs256SignedByOpenSSLCLI() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try runChecked(
            ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "rsa.key"],
            in: directory
        )
        let modulusLine = try runChecked(["openssl", "rsa", "-in", "rsa.key", "-noout", "-modulus"], in: directory)
        let modulus = hex(
            String(modulusLine.trimmingCharacters(in: .whitespacesAndNewlines).dropFirst("Modulus=".count))
        )
        let message = Array("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjMifQ".utf8)
        try Data(message).write(to: URL(fileURLWithPath: directory + "/message"))
        try runChecked(["openssl", "dgst", "-sha256", "-sign", "rsa.key", "-out", "rsa.sig", "message"], in: directory)
        let signature = [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/rsa.sig")))

        // JWK components are base64url: go through that path as a JWKS consumer would.
        let key = try RSAPublicKey(
            modulus: try #require(Base64URL.decode(Base64URL.encode(modulus))),
            exponent: try #require(Base64URL.decode("AQAB"))
        )
        #expect(key.modulusBitCount == 2048)
        #expect(key.isValidRS256Signature(signature, for: message))
        var flipped = signature
        flipped[17] ^= 0x40
        #expect(!key.isValidRS256Signature(flipped, for: message))
        #expect(!key.isValidRS256Signature(signature, for: message + [0x2e]))
        #expect(!key.isValidRS256Signature([], for: message))
    }

    @Test func rsaRejectsWeakOrMalformedKeys() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try runChecked(
            ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", "weak.key"],
            in: directory
        )
        let modulusLine = try runChecked(["openssl", "rsa", "-in", "weak.key", "-noout", "-modulus"], in: directory)
        let modulus = hex(
            String(modulusLine.trimmingCharacters(in: .whitespacesAndNewlines).dropFirst("Modulus=".count))
        )
        #expect(throws: OpenSSLError.self) { try RSAPublicKey(modulus: modulus, exponent: [1, 0, 1]) }
        #expect(throws: OpenSSLError.self) { try RSAPublicKey(modulus: [], exponent: [1, 0, 1]) }
        #expect(throws: OpenSSLError.self) {
            try RSAPublicKey(modulus: [UInt8](repeating: 0xff, count: 256), exponent: [2])
        }
    }

    @Test func es256SignedByOpenSSLCLI() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try runChecked(
            ["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "ec.key"],
            in: directory
        )
        try runChecked(
            ["openssl", "pkey", "-in", "ec.key", "-pubout", "-outform", "DER", "-out", "ec.der"],
            in: directory
        )
        let spki = [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/ec.der")))
        let point = Array(spki.suffix(65))  // the SPKI ends with the uncompressed point 04 ‖ x ‖ y
        #expect(point[0] == 0x04)
        let message = Array("eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiI0NTYifQ".utf8)
        try Data(message).write(to: URL(fileURLWithPath: directory + "/message"))

        let key = try P256PublicKey(x: point[1...32], y: point[33...64])
        // ECDSA signatures are randomised: check several, so r or s with a leading zero byte
        // (a shorter DER integer) is likely to be covered too.
        for _ in 0..<8 {
            try runChecked(
                ["openssl", "dgst", "-sha256", "-sign", "ec.key", "-out", "ec.sig", "message"],
                in: directory
            )
            let der = [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/ec.sig")))
            let signature = rawECDSASignature(fromDER: der)
            #expect(key.isValidES256Signature(signature, for: message))
            var flipped = signature
            flipped[40] ^= 0x01
            #expect(!key.isValidES256Signature(flipped, for: message))
            #expect(!key.isValidES256Signature(der, for: message))  // DER is not the JWS form
            #expect(!key.isValidES256Signature(signature, for: Array(message.dropLast())))
        }
    }

    @Test func p256RejectsPointsOffTheCurve() {
        var x = [UInt8](repeating: 0, count: 32)
        x[31] = 1
        let y = [UInt8](repeating: 0, count: 32)
        #expect(throws: OpenSSLError.self) { try P256PublicKey(x: x, y: y) }
        #expect(throws: OpenSSLError.self) { try P256PublicKey(x: x.dropLast(), y: y) }
    }

    /// Turns a DER ECDSA-Sig-Value into JWS's r ‖ s with 32-byte halves.
    private func rawECDSASignature(fromDER der: [UInt8]) -> [UInt8] {
        var index = 2  // SEQUENCE and a short-form length: P-256 signatures are at most 72 bytes
        func integer() -> [UInt8] {
            precondition(der[index] == 0x02)
            let length = Int(der[index + 1])
            var value = Array(der[(index + 2)..<(index + 2 + length)])
            index += 2 + length
            while value.count > 32 { value.removeFirst() }
            return [UInt8](repeating: 0, count: 32 - value.count) + value
        }
        return integer() + integer()
    }
}
