#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The addresses a target's name resolves to, for a client that balances over them (`ReplicaBalancer`).
enum DNSAddresses {
    /// Whether `host` is an IPv4 or IPv6 address rather than a name.
    static func isLiteral(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    /// The distinct IPv4 addresses of `name` (its IPv6 ones when it has no IPv4 one), in the resolver's order;
    /// empty when it does not resolve. Blocking (getaddrinfo): called when a client is made and from its health
    /// task. IPv4 first so that `localhost` is one address, not two.
    static func resolve(_ name: String) -> [String] {
        for family in [AF_INET, AF_INET6] {
            var hints = addrinfo()
            hints.ai_family = family
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var list: UnsafeMutablePointer<addrinfo>?
            guard getaddrinfo(name, nil, &hints, &list) == 0, let first = list else { continue }
            defer { freeaddrinfo(first) }
            var addresses: [String] = []
            var entry: UnsafeMutablePointer<addrinfo>? = first
            while let info = entry {
                var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
                let source: UnsafeRawPointer? =
                    family == AF_INET
                    ? info.pointee.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                        UnsafeRawPointer(withUnsafePointer(to: &$0.pointee.sin_addr) { $0 })
                    }
                    : info.pointee.ai_addr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                        UnsafeRawPointer(withUnsafePointer(to: &$0.pointee.sin6_addr) { $0 })
                    }
                if let source, inet_ntop(family, source, &text, socklen_t(text.count)) != nil {
                    let address = String(cString: text)
                    if !addresses.contains(address) { addresses.append(address) }
                }
                entry = info.pointee.ai_next
            }
            if !addresses.isEmpty { return addresses }
        }
        return []
    }
}
