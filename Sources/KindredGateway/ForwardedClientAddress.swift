import Foundation
import NIOCore

/// The client's address from a proxy header in the X-Forwarded-For style (`client, proxy1, proxy2`), where each
/// proxy appends the address it received the request from. Only what the trusted proxies appended can be
/// believed: anything to the left of it the client may have written itself (a client that sends
/// `X-Forwarded-For: 1.2.3.4` through a proxy that appends would otherwise pick its own rate-limit key). With
/// `trustedProxies` proxies in front of the gateway, the client's address is the entry that many places from the
/// right: the one the outermost trusted proxy appended.
///
/// Entries are trimmed, and may be IPv4 or IPv6, bare or bracketed, with or without a port (`[2001:db8::1]:443`,
/// `203.0.113.7:5555`); the answer is the address alone in its canonical text (the same key however a proxy
/// spells it). Too few entries (the request did not come through every trusted proxy), or an entry there that is
/// not an address: nil, and the caller uses the connection's address. Several header lines count as one list, in
/// order.
struct ForwardedClientAddress: Sendable, Hashable {
    /// Proxies in front of the gateway that append to the header (at least 1).
    let trustedProxies: Int

    init(trustedProxies: Int) {
        precondition(trustedProxies >= 1, "at least the proxy that sets the header")
        self.trustedProxies = trustedProxies
    }

    /// The client's address from the header's values (one per header line), or nil.
    func clientAddress(headerValues: [String]) -> String? {
        let entries = headerValues.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }
        guard entries.count >= self.trustedProxies else { return nil }
        return Self.address(entries[entries.count - self.trustedProxies])
    }

    /// One entry as a canonical IP address, or nil when it is not one.
    static func address(_ entry: Substring) -> String? {
        var text = entry.trimmingCharacters(in: .whitespaces)[...]
        if text.hasPrefix("[") {
            // [v6] or [v6]:port
            guard let close = text.firstIndex(of: "]") else { return nil }
            let rest = text[text.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && Self.isPort(rest.dropFirst())) else { return nil }
            text = text[text.index(after: text.startIndex)..<close]
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            // v4:port (a bare IPv6 address has at least two colons)
            guard Self.isPort(text[text.index(after: colon)...]) else { return nil }
            text = text[..<colon]
        }
        guard !text.isEmpty, text.count <= 45, text.allSatisfy(Self.isAddressCharacter),
            let address = try? SocketAddress(ipAddress: String(text), port: 0)
        else { return nil }
        return address.ipAddress
    }

    private static func isAddressCharacter(_ character: Character) -> Bool {
        character.isASCII && (character.isHexDigit || character == "." || character == ":")
    }

    private static func isPort(_ text: Substring) -> Bool {
        guard !text.isEmpty, text.count <= 5, text.allSatisfy({ $0.isASCII && $0.isNumber }), let port = Int(text)
        else { return false }
        return (0...65_535).contains(port)
    }
}
