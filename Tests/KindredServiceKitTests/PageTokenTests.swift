import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredOpenSSL
import KindredServiceKit
import Testing

@Suite struct PageTokenTests {
    let key = Array(repeating: UInt8(7), count: 32)
    let now = Date(timeIntervalSince1970: 1_700_000_000)

    @Test(arguments: [0, 20, 1_000_000])
    func roundTrip(offset: Int) {
        let token = PageToken.encode(offset: offset, key: self.key, scope: "user-a|filters", now: self.now)
        #expect(PageToken.decode(token, key: self.key, scope: "user-a|filters", now: self.now) == offset)
    }

    /// A request's token: none is the first page; one that does not decode is INVALID_ARGUMENT with the one
    /// reason every list RPC gives, naming the field.
    @Test func aRequestsTokenIsAnOffsetOrTheOneRefusal() throws {
        let token = PageToken.encode(offset: 40, key: self.key, scope: "user-a", now: self.now)
        #expect(try PageToken.offset(of: "", key: self.key, scope: "user-a", now: self.now) == 0)
        #expect(try PageToken.offset(of: token, key: self.key, scope: "user-a", now: self.now) == 40)
        for bad in [token, "not-a-token", String(repeating: "A", count: 300)] {
            do {
                _ = try PageToken.offset(of: bad, key: self.key, scope: "user-b", now: self.now)
                Issue.record("a token for another scope passed")
            } catch {
                #expect(error.code == .invalidArgument)
                #expect(error.errorDetail?.reason == "PAGE_TOKEN_INVALID")
                #expect(error.errorDetail?.fieldViolations.map(\.field) == ["page_token"])
            }
        }
    }

    @Test func otherUsersScopeOrKeyIsRefused() {
        let token = PageToken.encode(offset: 40, key: self.key, scope: "user-a", now: self.now)
        #expect(PageToken.decode(token, key: self.key, scope: "user-b", now: self.now) == nil)
        #expect(PageToken.decode(token, key: self.key, scope: "user-a|other filters", now: self.now) == nil)
        #expect(PageToken.decode(token, key: Array(repeating: 8, count: 32), scope: "user-a", now: self.now) == nil)
    }

    /// Replicas and restarts of one service derive the same key from its secret; services differ; without a
    /// secret every process has its own.
    @Test func keysDerivedFromTheServiceSecret() {
        let secret = String(repeating: "s", count: 40)
        let replica = PageToken.key(service: "profile", secret: secret)
        #expect(replica.count == 32)
        #expect(PageToken.key(service: "profile", secret: secret) == replica)
        #expect(PageToken.key(service: "chat", secret: secret) != replica)
        #expect(PageToken.key(service: "profile", secret: secret + "x") != replica)
        #expect(PageToken.key(service: "profile", secret: nil) != PageToken.key(service: "profile", secret: nil))
        let token = PageToken.encode(offset: 40, key: replica, scope: "u", now: self.now)
        #expect(PageToken.decode(token, key: PageToken.key(service: "profile", secret: secret), scope: "u", now: self.now) == 40)
    }

    @Test func expiredTokenIsRefused() {
        let token = PageToken.encode(offset: 40, key: self.key, scope: "s", lifetime: .seconds(60), now: self.now)
        #expect(PageToken.decode(token, key: self.key, scope: "s", now: self.now.addingTimeInterval(59)) == 40)
        #expect(PageToken.decode(token, key: self.key, scope: "s", now: self.now.addingTimeInterval(60)) == nil)
    }

    @Test func tamperedTokensAreRefused() {
        let token = PageToken.encode(offset: 40, key: self.key, scope: "s", now: self.now)
        var bytes = Base64URL.decode(token)!
        // Change the offset ("40" → "90") keeping the MAC; flip a MAC bit; drop the separator.
        var offsetChanged = bytes
        offsetChanged[0] = UInt8(ascii: "9")
        var macChanged = bytes
        macChanged[macChanged.count - 1] ^= 1
        bytes.removeAll { $0 == 0 }
        for forged in [offsetChanged, macChanged, bytes].map({ Base64URL.encode($0) }) + [
            "", "garbage!", String(repeating: "A", count: 300),
        ] {
            #expect(PageToken.decode(forged, key: self.key, scope: "s", now: self.now) == nil)
        }
    }

    @Test func tokenWithAForgedLongerExpiryIsRefused() {
        // The expiry is inside the MAC: extending it without the key fails.
        let token = PageToken.encode(offset: 1, key: self.key, scope: "s", lifetime: .seconds(1), now: self.now)
        var bytes = Base64URL.decode(token)!
        let split = bytes.firstIndex(of: 0)!
        let payload = String(decoding: bytes[..<split], as: UTF8.self)
        let extended = payload.split(separator: ".")[0] + ".9999999999"
        bytes.replaceSubrange(..<split, with: Array(extended.utf8))
        #expect(PageToken.decode(Base64URL.encode(bytes), key: self.key, scope: "s", now: self.now) == nil)
    }
}
