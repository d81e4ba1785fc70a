import Foundation
import KindredOpenSSL

/// A JSON Web Key Set of an OpenID provider (Google, Apple), loaded from its JWKS document. Only RSA (RS256)
/// and P-256 (ES256) signature keys are kept; others are ignored.
public struct JSONWebKeySet: Sendable {
    enum Key: Sendable {
        case rsa(RSAPublicKey)
        case p256(P256PublicKey)
    }

    var keys: [String: Key]

    init(keys: [String: Key]) {
        self.keys = keys
    }

    /// A set without keys (nothing verifies against it).
    public static let empty = JSONWebKeySet(keys: [:])

    public var keyIDs: [String] { self.keys.keys.sorted() }

    private struct Document: Decodable {
        struct JWK: Decodable {
            let kty: String
            let kid: String?
            let use: String?
            let alg: String?
            let n: String?
            let e: String?
            let crv: String?
            let x: String?
            let y: String?
        }
        let keys: [JWK]
    }

    public init(json: Data) throws(TokenError) {
        guard let document = try? JSONDecoder().decode(Document.self, from: json) else { throw TokenError(.malformed) }
        var keys: [String: Key] = [:]
        for jwk in document.keys where jwk.use == nil || jwk.use == "sig" {
            guard let kid = jwk.kid else { continue }
            switch jwk.kty {
            case "RSA":
                guard let n = jwk.n.flatMap(Base64URL.decode), let e = jwk.e.flatMap(Base64URL.decode),
                    let key = try? RSAPublicKey(modulus: n, exponent: e)
                else { continue }
                keys[kid] = .rsa(key)
            case "EC" where jwk.crv == "P-256":
                guard let x = jwk.x.flatMap(Base64URL.decode), let y = jwk.y.flatMap(Base64URL.decode),
                    let key = try? P256PublicKey(x: x, y: y)
                else { continue }
                keys[kid] = .p256(key)
            default:
                continue
            }
        }
        self.keys = keys
    }
}

/// The claims Kindred reads from an OpenID Connect ID token.
public struct IDTokenClaims: Sendable, Hashable {
    public let issuer: String
    public let subject: String
    public let audiences: [String]
    public let expiresAt: Int64
    public let issuedAt: Int64
    public let nonce: String?
    public let email: String?
    public let emailVerified: Bool
}

/// Verifies ID tokens from configured issuers: RS256/ES256 signature against the issuer's JWKS, `iss`, `aud`,
/// `exp`/`nbf`/`iat` with leeway, and the `nonce` the client was given.
public struct IDTokenVerifier: Sendable {
    /// Accepted `iss` values (Google uses both "https://accounts.google.com" and "accounts.google.com").
    public var issuers: Set<String>
    /// Accepted audiences: the app's OAuth client ids.
    public var audiences: Set<String>
    public var keySet: JSONWebKeySet
    /// Clock skew tolerated, seconds. Default 60.
    public var leewaySeconds: Int64 = 60

    public init(issuers: Set<String>, audiences: Set<String>, keySet: JSONWebKeySet) {
        self.issuers = issuers
        self.audiences = audiences
        self.keySet = keySet
    }

    private struct Payload: Decodable {
        let iss: String?
        let sub: String?
        let aud: Audience?
        let exp: Int64?
        let iat: Int64?
        let nbf: Int64?
        let nonce: String?
        let email: String?
        let emailVerified: Flag?

        enum CodingKeys: String, CodingKey {
            case iss, sub, aud, exp, iat, nbf, nonce, email
            case emailVerified = "email_verified"
        }

        /// `aud` is a string or an array of strings.
        struct Audience: Decodable {
            let values: [String]
            init(from decoder: any Decoder) throws {
                let container = try decoder.singleValueContainer()
                if let one = try? container.decode(String.self) {
                    self.values = [one]
                } else {
                    self.values = try container.decode([String].self)
                }
            }
        }

        /// Apple sends `email_verified` as the string "true"; Google as a boolean.
        struct Flag: Decodable {
            let value: Bool
            init(from decoder: any Decoder) throws {
                let container = try decoder.singleValueContainer()
                if let bool = try? container.decode(Bool.self) {
                    self.value = bool
                } else {
                    self.value = (try container.decode(String.self)) == "true"
                }
            }
        }
    }

    public func verify(
        _ token: String,
        nonce expectedNonce: String?,
        now: Int64 = Int64(Date().timeIntervalSince1970)
    ) throws(TokenError) -> IDTokenClaims {
        let jws = try CompactJWS(token)
        guard let kid = jws.header.kid, let key = self.keySet.keys[kid] else { throw TokenError(.unknownKey) }
        let valid: Bool
        switch (jws.header.alg, key) {
        case ("RS256", .rsa(let rsa)): valid = rsa.isValidRS256Signature(jws.signature, for: jws.signingInput)
        case ("ES256", .p256(let p256)): valid = p256.isValidES256Signature(jws.signature, for: jws.signingInput)
        default: throw TokenError(.unsupportedAlgorithm)
        }
        guard valid else { throw TokenError(.badSignature) }
        guard let payload = try? JSONDecoder().decode(Payload.self, from: jws.payload),
            let issuer = payload.iss, let subject = payload.sub, let audiences = payload.aud?.values,
            let expiresAt = payload.exp, let issuedAt = payload.iat
        else { throw TokenError(.missingClaim) }
        guard self.issuers.contains(issuer) else { throw TokenError(.wrongIssuer) }
        guard !self.audiences.isDisjoint(with: audiences) else { throw TokenError(.wrongAudience) }
        guard expiresAt > now - self.leewaySeconds else { throw TokenError(.expired) }
        guard (payload.nbf ?? issuedAt) <= now + self.leewaySeconds else { throw TokenError(.notYetValid) }
        if let expectedNonce {
            // Compare in constant time: the nonce binds the token to the client's sign-in attempt.
            guard let nonce = payload.nonce, ConstantTime.equals(Array(nonce.utf8), Array(expectedNonce.utf8)) else {
                throw TokenError(.wrongNonce)
            }
        }
        return IDTokenClaims(
            issuer: issuer,
            subject: subject,
            audiences: audiences,
            expiresAt: expiresAt,
            issuedAt: issuedAt,
            nonce: payload.nonce,
            email: payload.email,
            emailVerified: payload.emailVerified?.value ?? false
        )
    }
}
