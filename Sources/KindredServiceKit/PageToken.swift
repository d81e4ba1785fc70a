import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredOpenSSL
import KindredProto

/// Opaque, signed page tokens for list RPCs.
///
/// A token is `base64url(offset "." expiry || 0 || HMAC-SHA256(key, scope || 0 || offset "." expiry))`. The
/// scope binds it to one caller and one query (e.g. `"<user id>|<filters>"`): a token handed out for another
/// user or other filters, a tampered one, or one past its expiry decodes to nil; handlers read a request's token
/// with ``offset(of:key:scope:now:)``, which answers such a token with INVALID_ARGUMENT `PAGE_TOKEN_INVALID`.
/// The key is the service's own secret (32 random bytes); tokens do not survive a key change, which only sends
/// clients back to the first page.
public enum PageToken {
    /// How long a token stays valid by default: a client paging through a list takes minutes, not hours.
    public static let defaultLifetime: Duration = .seconds(3600)

    /// A service's signing key for its page tokens: derived from the service's secret (HMAC-SHA-256 under a
    /// label naming the service), so a token one replica or one process handed out is good at another and after a
    /// restart; without a secret (tests, tools), 32 random bytes, and tokens last as long as the process.
    public static func key(service: String, secret: String?) -> [UInt8] {
        guard let secret else {
            return (try? SecureRandom.bytes(count: 32)) ?? SHA256.hash(Array(UUID().uuidString.utf8))
        }
        return HMACSHA256.authenticationCode(for: Array("kindred-page-token:\(service)".utf8), key: Array(secret.utf8))
    }

    /// The token for the page starting at `offset`.
    public static func encode(
        offset: Int,
        key: [UInt8],
        scope: String,
        lifetime: Duration = PageToken.defaultLifetime,
        now: Date = Date()
    ) -> String {
        let expiry = Int64(now.timeIntervalSince1970) + lifetime.components.seconds
        let payload = Array("\(offset).\(expiry)".utf8)
        return Base64URL.encode(payload + [0] + Self.mac(payload, key: key, scope: scope))
    }

    /// The offset a token stands for; nil when it is malformed, tampered with, for another scope or expired.
    public static func decode(_ token: String, key: [UInt8], scope: String, now: Date = Date()) -> Int? {
        guard token.utf8.count <= 256, let bytes = Base64URL.decode(token), let split = bytes.firstIndex(of: 0) else {
            return nil
        }
        let payload = Array(bytes[..<split])
        let mac = Array(bytes[(split + 1)...])
        guard ConstantTime.equals(mac, Self.mac(payload, key: key, scope: scope)) else { return nil }
        let parts = String(decoding: payload, as: UTF8.self).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let offset = Int(parts[0]), offset >= 0, let expiry = Int64(parts[1]),
            Int64(now.timeIntervalSince1970) < expiry
        else { return nil }
        return offset
    }

    /// The offset of a request's `page_token`: 0 for none (the first page); INVALID_ARGUMENT with the reason
    /// `PAGE_TOKEN_INVALID` on `page_token` for one that does not decode (every list RPC answers it alike).
    public static func offset(of token: String, key: [UInt8], scope: String, now: Date = Date()) throws(RPCError)
        -> Int
    {
        guard !token.isEmpty else { return 0 }
        guard let offset = Self.decode(token, key: key, scope: scope, now: now) else { throw Self.invalid }
        return offset
    }

    /// The answer to a page token that does not decode.
    public static var invalid: RPCError {
        RPCError.detailed(
            .invalidArgument, "The request is invalid", reason: "PAGE_TOKEN_INVALID",
            violations: [
                .init(field: "page_token", reason: "PAGE_TOKEN_INVALID", hint: "use a token from a previous page")
            ])
    }

    private static func mac(_ payload: [UInt8], key: [UInt8], scope: String) -> [UInt8] {
        HMACSHA256.authenticationCode(for: Array(scope.utf8) + [0] + payload, key: key)
    }
}
