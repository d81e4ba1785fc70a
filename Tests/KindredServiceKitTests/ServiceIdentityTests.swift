import Foundation
import KindredGRPC
import KindredIdentity
import KindredServiceKit
import Synchronization
import Testing

@Suite struct ServiceIdentityTests {
    /// Subject, roles, allowed services → the service name, or nil for PERMISSION_DENIED.
    static let cases: [(String, [String], [String], String?)] = [
        ("service:auth", ["service"], ["auth", "match"], "auth"),
        ("service:chat", ["service"], ["auth", "match"], nil),
        ("service:auth", [], ["auth"], nil),  // a service subject without the service role
        ("0190a000-0000-7000-8000-000000000001", ["service", "admin"], ["auth"], nil),  // a user
    ]

    @Test(arguments: Self.cases)
    func onlyTheNamedServicesPass(subject: String, roles: [String], allowed: [String], expected: String?) async throws {
        let token = try TestIdentity.token(subject: subject, roles: roles)
        let caller = try await TestIdentity.authenticator.authenticate(authorization: "Bearer " + token)
        do {
            let name = try ServiceAccess.check(caller, allowed: Set(allowed))
            #expect(name == expected)
        } catch {
            #expect(expected == nil && error.code == .permissionDenied)
        }
    }

    @Test func tokenIsReusedUntilTheMarginBeforeExpiryThenRefetched() async throws {
        let clock = Mutex(Date(timeIntervalSince1970: 1_000_000))
        let fetches = Mutex(0)
        let source = ServiceTokenSource(refreshMargin: .seconds(60), now: { clock.withLock { $0 } }) {
            let count = fetches.withLock { count -> Int in
                count += 1
                return count
            }
            let now = clock.withLock { $0 }
            return ("token-\(count)", Int64((now.timeIntervalSince1970 + 900) * 1000))
        }
        #expect(try await source.token() == "token-1")
        clock.withLock { $0 += 839 }  // 61 s before expiry
        #expect(try await source.token() == "token-1")
        clock.withLock { $0 += 2 }  // 59 s before expiry: replaced
        #expect(try await source.token() == "token-2")
        source.invalidate()
        #expect(try await source.token() == "token-3")
        #expect(try await source.metadata()["authorization"] == "Bearer token-3")
        // Concurrent callers share one fetch.
        source.invalidate()
        try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<10 { group.addTask { try await source.token() } }
            for try await token in group { #expect(token == "token-4") }
        }
        #expect(fetches.withLock { $0 } == 4)
    }

    @Test func aShortLivedTokenIsRefreshedAtHalfItsLifetime() async throws {
        let clock = Mutex(Date(timeIntervalSince1970: 1_000_000))
        let fetches = Mutex(0)
        let source = ServiceTokenSource(refreshMargin: .seconds(60), now: { clock.withLock { $0 } }) {
            fetches.withLock { $0 += 1 }
            return ("t", Int64((clock.withLock { $0 }.timeIntervalSince1970 + 30) * 1000))
        }
        _ = try await source.token()
        clock.withLock { $0 += 14 }
        _ = try await source.token()
        #expect(fetches.withLock { $0 } == 1)
        clock.withLock { $0 += 2 }
        _ = try await source.token()
        #expect(fetches.withLock { $0 } == 2)
    }

    @Test func aFailedFetchIsRetriedByTheNextCaller() async throws {
        let fail = Mutex(true)
        let source = ServiceTokenSource {
            if fail.withLock({ $0 }) { throw RPCError(.unavailable, "auth is down") }
            return ("t", Int64((Date().timeIntervalSince1970 + 900) * 1000))
        }
        await #expect(throws: RPCError.self) { try await source.token() }
        fail.withLock { $0 = false }
        #expect(try await source.token() == "t")
    }
}
