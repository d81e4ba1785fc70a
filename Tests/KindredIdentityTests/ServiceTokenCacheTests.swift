import Foundation
import Testing

@testable import KindredIdentity

@Suite("Service token cache")
struct ServiceTokenCacheTests {
    @Test func serviceTokenCacheRefreshesBeforeExpiry() {
        var cache = ServiceTokenCache()
        let start = Date(timeIntervalSince1970: 1_000)
        #expect(cache.usableToken(at: start) == nil)
        cache.store(token: "t", expiresUnixMs: 1_900_000, fetchedAt: start, margin: .seconds(60))
        #expect(cache.usableToken(at: start.addingTimeInterval(839)) == "t")
        #expect(cache.usableToken(at: start.addingTimeInterval(840)) == nil)
        // Already expired when stored (clock skew): never handed out.
        cache.store(token: "old", expiresUnixMs: 900_000, fetchedAt: start, margin: .seconds(60))
        #expect(cache.usableToken(at: start) == nil)
    }
}
