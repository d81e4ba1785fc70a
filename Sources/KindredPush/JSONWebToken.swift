#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import KindredOpenSSL

/// Builds compact JWS/JWT strings (RFC 7515 §7.1): base64url(header) "." base64url(claims) "." base64url(signature).
enum JSONWebToken {
    /// Signs `header` and `claims` (encoded as JSON) with `sign`, which receives the ASCII signing input.
    static func compact(
        header: some Encodable,
        claims: some Encodable,
        sign: ([UInt8]) throws -> [UInt8]
    ) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let input = Base64URL.encode(try encoder.encode(header)) + "." + Base64URL.encode(try encoder.encode(claims))
        return input + "." + Base64URL.encode(try sign(Array(input.utf8)))
    }
}
