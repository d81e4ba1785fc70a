import Foundation
import KindredOpenSSL

/// The claims of a Kindred access token (auth.v1 TokenBundle documents them).
public struct AccessTokenClaims: Codable, Hashable, Sendable {
    /// Issuer, "kindred-auth".
    public var iss: String
    /// Subject: a user id, or "service:<name>" for service tokens.
    public var sub: String
    /// Audience, "kindred".
    public var aud: String
    /// Expiry, issued-at and not-before, in seconds since the epoch.
    public var exp: Int64
    public var iat: Int64
    public var nbf: Int64
    /// Token id.
    public var jti: String
    /// Session id; absent for service tokens.
    public var sid: String?
    /// Community id.
    public var cid: String?
    /// Roles, e.g. ["user"], ["user", "admin"], ["service"].
    public var roles: [String]
    /// When the user last proved a credential (seconds), for "recent sign-in" checks.
    public var authTime: Int64?

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, exp, iat, nbf, jti, sid, cid, roles
        case authTime = "auth_time"
    }

    public init(
        issuer: String = AccessTokenPolicy.issuer,
        subject: String,
        audience: String = AccessTokenPolicy.audience,
        issuedAt: Int64,
        lifetimeSeconds: Int64,
        tokenID: String,
        sessionID: String?,
        communityID: String? = nil,
        roles: [String],
        authTime: Int64? = nil
    ) {
        self.iss = issuer
        self.sub = subject
        self.aud = audience
        self.iat = issuedAt
        self.nbf = issuedAt
        self.exp = issuedAt + min(lifetimeSeconds, AccessTokenPolicy.maxLifetimeSeconds)
        self.jti = tokenID
        self.sid = sessionID
        self.cid = communityID
        self.roles = roles
        self.authTime = authTime
    }
}

/// Fixed rules of Kindred access tokens.
public enum AccessTokenPolicy {
    public static let issuer = "kindred-auth"
    public static let audience = "kindred"
    /// DESIGN.md §6: access tokens live at most 15 minutes.
    public static let maxLifetimeSeconds: Int64 = 15 * 60
    /// The only algorithm access tokens may use.
    public static let algorithm = "EdDSA"
}

/// Signs access tokens with an Ed25519 key (auth's current signing key).
public struct AccessTokenSigner: Sendable {
    public let keyID: String
    private let key: Ed25519PrivateKey

    public init(keyID: String, key: Ed25519PrivateKey) {
        self.keyID = keyID
        self.key = key
    }

    public var publicKey: Ed25519PublicKey { self.key.publicKey }

    public func sign(_ claims: AccessTokenClaims) throws -> String {
        try CompactJWS.encode(header: ["alg": AccessTokenPolicy.algorithm, "kid": self.keyID, "typ": "JWT"], claims: claims) {
            try self.key.sign($0)
        }
    }
}

/// Verifies access tokens locally with auth's public keys: signature (EdDSA only), issuer, audience, and
/// `exp`/`nbf` with a small leeway for clock skew. No call to auth per request.
public struct AccessTokenVerifier: Sendable {
    public var keys: [String: Ed25519PublicKey]
    public var issuer: String = AccessTokenPolicy.issuer
    public var audience: String = AccessTokenPolicy.audience
    /// Clock skew tolerated on `exp` and `nbf`. Default 30 s.
    public var leewaySeconds: Int64 = 30

    public init(keys: [String: Ed25519PublicKey]) {
        self.keys = keys
    }

    /// The token's key id, read without verifying anything (to decide whether keys must be refetched).
    public static func keyID(of token: String) -> String? {
        (try? CompactJWS(token))?.header.kid
    }

    public func verify(_ token: String, now: Int64 = Int64(Date().timeIntervalSince1970)) throws(TokenError) -> AccessTokenClaims {
        let jws = try CompactJWS(token)
        // The algorithm comes from our policy, never from the token: "none", HS256 with the public key as a
        // secret and other substitutions are refused here.
        guard jws.header.alg == AccessTokenPolicy.algorithm else { throw TokenError(.unsupportedAlgorithm) }
        guard let kid = jws.header.kid, let key = self.keys[kid] else { throw TokenError(.unknownKey) }
        guard key.isValidSignature(jws.signature, for: jws.signingInput) else { throw TokenError(.badSignature) }
        guard let claims = try? JSONDecoder().decode(AccessTokenClaims.self, from: jws.payload) else {
            throw TokenError(.missingClaim)
        }
        guard claims.iss == self.issuer else { throw TokenError(.wrongIssuer) }
        guard claims.aud == self.audience else { throw TokenError(.wrongAudience) }
        guard claims.exp > now - self.leewaySeconds else { throw TokenError(.expired) }
        guard claims.nbf <= now + self.leewaySeconds else { throw TokenError(.notYetValid) }
        guard claims.exp - claims.iat <= AccessTokenPolicy.maxLifetimeSeconds else { throw TokenError(.malformed) }
        return claims
    }
}
