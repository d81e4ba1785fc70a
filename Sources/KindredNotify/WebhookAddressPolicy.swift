import NIOCore

/// Which addresses webhook deliveries may go to: none that reaches the deployment's own network. Refused are
/// loopback (127.0.0.0/8, ::1), private (RFC 1918: 10/8, 172.16/12, 192.168/16; RFC 4193: fc00::/7), link-local
/// (169.254.0.0/16, which holds the clouds' metadata address 169.254.169.254; fe80::/10), unspecified (0.0.0.0/8,
/// ::) and multicast or broadcast (224.0.0.0/4 and above, ff00::/8); an IPv4 address mapped into IPv6
/// (::ffff:a.b.c.d) is judged as the IPv4 address. Checked on an IP literal when an endpoint is registered, and on
/// the address every connection actually reaches (a name may resolve elsewhere at connect time: DNS rebinding).
enum WebhookAddressPolicy {
    /// What an endpoint's URL or address is told when refused.
    static let hint =
        "a public host: loopback, private (RFC 1918, fc00::/7), link-local (169.254.0.0/16, fe80::/10), "
        + "unspecified and multicast addresses are refused"

    /// Whether a connection may go to `address` (a socket address other than IP is refused).
    static func allows(_ address: SocketAddress) -> Bool {
        switch address {
        case .v4(let v4):
            let value = UInt32(bigEndian: v4.address.sin_addr.s_addr)
            return Self.allows(ipv4: value)
        case .v6(let v6):
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            return Self.allows(ipv6: bytes)
        case .unixDomainSocket:
            return false
        }
    }

    /// Whether `host` may be registered: an IP literal is judged by ``allows(_:)``; `localhost` and names under
    /// `.localhost` (RFC 6761: always loopback) are refused; any other name is judged when connecting.
    static func allows(host: String) -> Bool {
        let host = host.lowercased()
        if host == "localhost" || host.hasSuffix(".localhost") || host == "localhost." { return false }
        guard let literal = try? SocketAddress(ipAddress: host, port: 0) else { return true }
        return Self.allows(literal)
    }

    static func allows(ipv4 value: UInt32) -> Bool {
        let refused: [(UInt32, Int)] = [
            (0x0000_0000, 8),  // 0.0.0.0/8: unspecified, "this network"
            (0x7F00_0000, 8),  // 127.0.0.0/8: loopback
            (0x0A00_0000, 8),  // 10.0.0.0/8: private
            (0xAC10_0000, 12),  // 172.16.0.0/12: private
            (0xC0A8_0000, 16),  // 192.168.0.0/16: private
            (0xA9FE_0000, 16),  // 169.254.0.0/16: link-local, cloud metadata
            (0xE000_0000, 3),  // 224.0.0.0/3: multicast (224/4), reserved (240/4), broadcast
        ]
        return !refused.contains { prefix, bits in value >> (32 - bits) == prefix >> (32 - bits) }
    }

    static func allows(ipv6 bytes: [UInt8]) -> Bool {
        guard bytes.count == 16 else { return false }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            // ::ffff:a.b.c.d, an IPv4 address.
            return Self.allows(ipv4: bytes[12..<16].reduce(0) { $0 << 8 | UInt32($1) })
        }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] <= 1 { return false }  // :: unspecified, ::1 loopback
        if bytes[0] & 0xFE == 0xFC { return false }  // fc00::/7: unique local (private)
        if bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80 { return false }  // fe80::/10: link-local
        if bytes[0] == 0xFF { return false }  // ff00::/8: multicast
        return true
    }
}
