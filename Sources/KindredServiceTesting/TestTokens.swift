import Foundation
import KindredIdentity
import KindredOpenSSL
import KindredServiceKit

/// Access tokens for tests of a service that checks callers itself: a fresh Ed25519 key that the server under
/// test trusts in place of auth's keys (`AuthConnection(fixedKeys: tokens.trustedKeys, ...)`), and user and
/// service tokens signed with it, shaped as auth issues them (15 minutes, a session id for users).
public struct TestTokens: Sendable {
    public let key: Ed25519PrivateKey
    public let signer: AccessTokenSigner

    public init(keyID: String) {
        self.key = try! Ed25519PrivateKey()
        self.signer = AccessTokenSigner(keyID: keyID, key: self.key)
    }

    /// The keys to give the server under test.
    public var trustedKeys: [String: Ed25519PublicKey] { [self.signer.keyID: self.key.publicKey] }

    public func userToken(_ user: String, community: String, roles: [String] = ["user"]) -> String {
        let claims = AccessTokenClaims(
            subject: user, issuedAt: Int64(Date().timeIntervalSince1970) - 5, lifetimeSeconds: 900,
            tokenID: try! UUIDv7.generate(), sessionID: try! UUIDv7.generate(), communityID: community, roles: roles)
        return try! self.signer.sign(claims)
    }

    public func serviceToken(_ service: String) -> String {
        let claims = AccessTokenClaims(
            subject: "service:" + service, issuedAt: Int64(Date().timeIntervalSince1970) - 5, lifetimeSeconds: 900,
            tokenID: try! UUIDv7.generate(), sessionID: nil, roles: ["service"])
        return try! self.signer.sign(claims)
    }
}
