#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import KindredGRPC
import KindredOpenSSL
import Synchronization

/// Voluntary Application Server Identification (RFC 8292): each push carries
/// `Authorization: vapid t=<JWT>, k=<public key>`, an ES256 JWT whose `aud` is the push service's origin, `exp` at
/// most 24 hours ahead and `sub` the operator's contact, signed with the key whose public half the browser was
/// given at subscription time (`applicationServerKey`). A token is reused per origin until `refreshMargin` before
/// it expires, so signing does not happen per push.
final class WebPushVAPID: Sendable {
    private let key: P256PrivateKey
    /// The public key, base64url (uncompressed point): `k=` here, `applicationServerKey` in the browser.
    let publicKey: String
    private let subject: String
    private let lifetime: Duration
    private let refreshMargin: Duration
    private let clock: @Sendable () -> Date
    private let cached = Mutex<[String: (header: String, expires: Date)]>([:])

    /// Past this many origins the cache starts afresh (browsers use a handful of push services).
    static let maximumCachedOrigins = 256

    init(key: P256PrivateKey, subject: String, lifetime: Duration, refreshMargin: Duration, clock: @escaping @Sendable () -> Date) throws {
        self.key = key
        self.publicKey = Base64URL.encode(try key.publicKeyBytes())
        self.subject = subject
        self.lifetime = lifetime
        self.refreshMargin = refreshMargin
        self.clock = clock
    }

    private struct Header: Encodable {
        let typ = "JWT"
        let alg = "ES256"
    }

    private struct Claims: Encodable {
        let aud: String
        let exp: Int64
        let sub: String
    }

    /// The `authorization` value for pushes to `audience` (`https://host[:port]`).
    func authorization(audience: String) throws -> String {
        let now = self.clock()
        let margin = Double(self.refreshMargin.components.seconds)
        if let cached = self.cached.withLock({ $0[audience] }), cached.expires.timeIntervalSince(now) > margin {
            return cached.header
        }
        let expires = Date(timeIntervalSince1970: (now.timeIntervalSince1970 + Double(self.lifetime.components.seconds)).rounded(.down))
        let token = try JSONWebToken.compact(
            header: Header(),
            claims: Claims(aud: audience, exp: Int64(expires.timeIntervalSince1970), sub: self.subject)
        ) { try self.key.signES256($0) }
        let header = "vapid t=\(token), k=\(self.publicKey)"
        self.cached.withLock { cached in
            if cached.count >= Self.maximumCachedOrigins { cached.removeAll() }
            cached[audience] = (header, expires)
        }
        return header
    }

    /// The push service refused our token (401/403): the next push to `audience` signs a new one.
    func invalidate(audience: String) {
        _ = self.cached.withLock { $0.removeValue(forKey: audience) }
    }
}
