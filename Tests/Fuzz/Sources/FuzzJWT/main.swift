// JSON Web Tokens and JWKS documents (KindredIdentity): access-token verification (EdDSA), OpenID ID-token
// verification against a key set, and JWKS parsing. The first byte picks the case. Beyond not crashing: a made-up
// token is never accepted; a real access token with bytes changed, inserted or cut as the input says is refused or
// yields exactly the claims that were signed; a token whose header names another algorithm ("none", HS256, ...)
// is refused as UNSUPPORTED_ALGORITHM before any key is looked at; a key set parses or fails as MALFORMED, and
// keeps only keys with an id.
import FuzzSupport
import Foundation
@testable import KindredIdentity
import KindredOpenSSL

let signingKey = try! Ed25519PrivateKey(rawRepresentation: Array(repeating: UInt8(3), count: 32))
let signer = AccessTokenSigner(keyID: "k1", key: signingKey)
let verifier = AccessTokenVerifier(keys: ["k1": signingKey.publicKey])
let now: Int64 = 1_800_000_000
let claims = AccessTokenClaims(
    subject: "0190f1de-5c6e-7a1b-9c2d-3e4f5a6b7c8d", issuedAt: now, lifetimeSeconds: 900,
    tokenID: "t1", sessionID: "s1", communityID: "dating", roles: ["user"]
)
let token = try! signer.sign(claims)
let jwks = Array(
    #"{"keys":[{"kty":"EC","kid":"e1","crv":"P-256","x":"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4","y":"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"}]}"#.utf8
)
/// Made per input: a key set (or a Data) kept in a global reads as a leak to LeakSanitizer at exit (an enum
/// holding a reference stores its case in the pointer's spare bits, which hides the pointer from the leak scan).
func idVerifier() -> IDTokenVerifier {
    IDTokenVerifier(issuers: ["https://accounts.google.com"], audiences: ["kindred"], keySet: try! JSONWebKeySet(json: Data(jwks)))
}

func mutate(_ text: String, _ input: inout FuzzInput) -> String {
    var bytes = Array(text.utf8)
    for _ in 0..<(1 + Int(input.byte()) % 4) {
        let position = bytes.isEmpty ? 0 : (Int(input.byte()) << 8 | Int(input.byte())) % bytes.count
        let value = input.byte()
        switch input.byte() % 4 {
        case 0 where !bytes.isEmpty: bytes[position] = value
        case 1: bytes.insert(value, at: position)
        case 2 where !bytes.isEmpty: bytes.remove(at: position)
        default: bytes = Array(bytes[..<position])
        }
    }
    return String(decoding: bytes, as: UTF8.self)
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzJWT(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    switch input.byte() % 5 {
    case 0:  // a made-up access token
        let text = String(decoding: input.rest(), as: UTF8.self)
        require((try? verifier.verify(text, now: now)) == nil, "made-up access token accepted")
    case 1:  // a real one, edited
        let edited = mutate(token, &input)
        if let verified = try? verifier.verify(edited, now: now) {
            require(verified == claims, "edited token verified with other claims: \(edited)")
        }
    case 2:  // a header of the fuzzer's, the real payload and signature
        let header = Base64URL.encode(input.rest())
        let parts = token.split(separator: ".")
        let forged = "\(header).\(parts[1]).\(parts[2])"
        do {
            let verified = try verifier.verify(forged, now: now)
            require(verified == claims, "token with another header verified with other claims")
        } catch {
            if let jws = try? CompactJWS(forged), jws.header.alg != "EdDSA" {
                require(error.code == .unsupportedAlgorithm, "alg \(jws.header.alg) refused as \(error) not UNSUPPORTED_ALGORITHM")
            }
        }
    case 3:  // an ID token
        let text = String(decoding: input.rest(), as: UTF8.self)
        require((try? idVerifier().verify(text, nonce: nil, now: now)) == nil, "made-up ID token accepted")
    default:  // a JWKS document
        do {
            let set = try JSONWebKeySet(json: Data(input.rest()))
            require(set.keyIDs.count == set.keys.count, "key ids and keys differ")
        } catch {
            require(error.code == .malformed, "a key set refused as \(error)")
        }
    }
    return 0
}

runFuzzer(fuzzJWT)
