#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import KindredOpenSSL
import Synchronization

/// The provider authentication token of APNs: an ES256 JWT (`kid` = key id; `iss` = team id, `iat` = issue time)
/// signed with the team's `.p8` key, reused for `refreshInterval` and then signed anew. Apple refuses a token
/// older than an hour (403 ExpiredProviderToken) and new tokens more often than every 20 minutes
/// (429 TooManyProviderTokenUpdates), so one token serves every push and connection in between.
final class APNsProviderToken: Sendable {
    private let key: P256PrivateKey
    private let keyID: String
    private let teamID: String
    private let refreshInterval: Duration
    private let clock: @Sendable () -> Date
    private let cached = Mutex<(token: String, issuedAt: Date)?>(nil)

    init(key: P256PrivateKey, keyID: String, teamID: String, refreshInterval: Duration, clock: @escaping @Sendable () -> Date) {
        self.key = key
        self.keyID = keyID
        self.teamID = teamID
        self.refreshInterval = refreshInterval
        self.clock = clock
    }

    private struct Header: Encodable {
        let alg = "ES256"
        let kid: String
    }

    private struct Claims: Encodable {
        let iss: String
        let iat: Int64
    }

    /// The token to send now: the cached one while it is younger than `refreshInterval`, else a new one.
    func current() throws -> String {
        let now = self.clock()
        let interval = Double(self.refreshInterval.components.seconds)
        return try self.cached.withLock { cached in
            if let cached, now.timeIntervalSince(cached.issuedAt) < interval, now >= cached.issuedAt {
                return cached.token
            }
            let token = try JSONWebToken.compact(
                header: Header(kid: self.keyID),
                claims: Claims(iss: self.teamID, iat: Int64(now.timeIntervalSince1970))
            ) { try self.key.signES256($0) }
            cached = (token, now)
            return token
        }
    }

    /// APNs called `token` expired: the next push signs a new one (unless another push already did).
    func invalidate(_ token: String) {
        self.cached.withLock { cached in
            if cached?.token == token { cached = nil }
        }
    }
}
