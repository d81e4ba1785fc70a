import KindredGRPC
import KindredOpenSSL

/// Where a provider's HTTP API lives: `https://host[:port]` (HTTPS with ALPN h2; the port defaults to 443), parsed
/// from a setting so that a cluster can point a provider at a local peer instead of the real service.
struct PushOrigin: Sendable, Hashable {
    var host: String
    var port: Int

    /// Parses `https://host[:port]`, with an optional trailing slash; anything else (another scheme, a path,
    /// user info) is refused with `PushConfigurationError`.
    init(_ text: String, setting: String) throws {
        guard text.hasPrefix("https://") else {
            throw PushConfigurationError("\(setting) must be an https:// URL")
        }
        var rest = text.dropFirst("https://".count)
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.isEmpty, !rest.contains("/"), !rest.contains("@") else {
            throw PushConfigurationError("\(setting) must be https://host or https://host:port")
        }
        if rest.hasPrefix("[") {
            // An IPv6 literal: [address] or [address]:port.
            guard let close = rest.firstIndex(of: "]") else { throw PushConfigurationError("\(setting): bad IPv6 host") }
            self.host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            self.port = try Self.port(after.isEmpty ? nil : after.dropFirst(), setting: setting)
        } else if let colon = rest.lastIndex(of: ":") {
            self.host = String(rest[..<colon])
            self.port = try Self.port(rest[rest.index(after: colon)...], setting: setting)
        } else {
            self.host = String(rest)
            self.port = 443
        }
        guard !self.host.isEmpty else { throw PushConfigurationError("\(setting) has no host") }
    }

    /// A URL's parts when its path is wanted too (an OAuth token endpoint): the origin and the path ("/" at least).
    static func split(_ url: String, setting: String) throws -> (origin: PushOrigin, path: String) {
        guard url.hasPrefix("https://") else { throw PushConfigurationError("\(setting) must be an https:// URL") }
        let afterScheme = url.dropFirst("https://".count)
        let slash = afterScheme.firstIndex(of: "/") ?? afterScheme.endIndex
        let origin = try PushOrigin("https://" + afterScheme[..<slash], setting: setting)
        let path = slash == afterScheme.endIndex ? "/" : String(afterScheme[slash...])
        return (origin, path)
    }

    private static func port(_ text: Substring?, setting: String) throws -> Int {
        guard let text else { return 443 }
        guard let port = Int(text), (1...65535).contains(port) else {
            throw PushConfigurationError("\(setting) has an invalid port")
        }
        return port
    }

    /// An HTTP/2 client configuration for this origin: TLS 1.2+ with ALPN h2, the server's certificate checked
    /// against `trustRootsFile` (a local peer's CA) or the system store, and its name against `host`.
    func clientConfiguration(trustRootsFile: String?, connections: Int) throws -> HTTP2ClientConfiguration {
        let trust: TLSConfiguration.TrustRoots = trustRootsFile.map { .file($0) } ?? .systemDefault
        let tls = try TLSContext(configuration: .client(trustRoots: trust, serverName: self.host))
        var configuration = HTTP2ClientConfiguration(host: self.host, port: self.port, tls: tls)
        configuration.authority = self.port == 443 ? self.host : "\(self.host):\(self.port)"
        configuration.connectionCount = max(1, connections)
        configuration.maxConnectionCount = max(1, connections)
        // Answers of push APIs are small JSON documents.
        configuration.maxReceiveMessageSize = 64 << 10
        configuration.connectTimeout = .seconds(5)
        return configuration
    }
}

/// A provider setting that cannot work (a malformed URL, a key file that is not a key). The message names the
/// setting or file, never a key.
public struct PushConfigurationError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
