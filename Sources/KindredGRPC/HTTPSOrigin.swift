import KindredOpenSSL

/// Where an HTTPS API lives: `https://host[:port]` (the port defaults to 443), parsed from a setting, and the
/// `HTTP2Client` configuration to reach it (TLS with ALPN h2). Push providers and the OIDC key fetch use it, so a
/// cluster can point them at local peers instead of the real services.
public struct HTTPSOrigin: Sendable, Hashable {
    public var host: String
    public var port: Int

    /// Parses `https://host[:port]`, with an optional trailing slash; anything else (another scheme, a path,
    /// user info, a bad port) throws `HTTPSOriginError`.
    public init(_ text: String) throws(HTTPSOriginError) {
        guard text.hasPrefix("https://") else { throw HTTPSOriginError("must be an https:// URL") }
        var rest = text.dropFirst("https://".count)
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.isEmpty, !rest.contains("/"), !rest.contains("@") else {
            throw HTTPSOriginError("must be https://host or https://host:port")
        }
        if rest.hasPrefix("[") {
            // An IPv6 literal: [address] or [address]:port.
            guard let close = rest.firstIndex(of: "]") else { throw HTTPSOriginError("has a bad IPv6 host") }
            self.host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            self.port = try Self.port(after.isEmpty ? nil : after.dropFirst())
        } else if let colon = rest.lastIndex(of: ":") {
            self.host = String(rest[..<colon])
            self.port = try Self.port(rest[rest.index(after: colon)...])
        } else {
            self.host = String(rest)
            self.port = 443
        }
        guard !self.host.isEmpty else { throw HTTPSOriginError("has no host") }
    }

    /// A URL's origin and path ("/" at least, query included): `https://oauth2.googleapis.com/token`.
    public static func split(_ url: String) throws(HTTPSOriginError) -> (origin: HTTPSOrigin, path: String) {
        guard url.hasPrefix("https://") else { throw HTTPSOriginError("must be an https:// URL") }
        let afterScheme = url.dropFirst("https://".count)
        let slash = afterScheme.firstIndex(of: "/") ?? afterScheme.endIndex
        let origin = try HTTPSOrigin("https://" + afterScheme[..<slash])
        let path = slash == afterScheme.endIndex ? "/" : String(afterScheme[slash...])
        return (origin, path)
    }

    private static func port(_ text: Substring?) throws(HTTPSOriginError) -> Int {
        guard let text else { return 443 }
        guard let port = Int(text), (1...65535).contains(port) else { throw HTTPSOriginError("has an invalid port") }
        return port
    }

    /// An HTTP/2 client configuration for this origin: TLS 1.2+ with ALPN h2, the server's certificate checked
    /// against `trustRootsFile` (a local peer's CA) or the system store, and its name against `host`; `connections`
    /// connections; response bodies up to `maxBodySize`.
    /// - Throws: `OpenSSLError` when the CA file cannot be read.
    public func clientConfiguration(
        trustRootsFile: String?,
        connections: Int,
        maxBodySize: Int = 64 << 10
    ) throws -> HTTP2ClientConfiguration {
        let trust: TLSConfiguration.TrustRoots = trustRootsFile.map { .file($0) } ?? .systemDefault
        let tls = try TLSContext(configuration: .client(trustRoots: trust, serverName: self.host))
        var configuration = HTTP2ClientConfiguration(host: self.host, port: self.port, tls: tls)
        configuration.authority = self.port == 443 ? self.host : "\(self.host):\(self.port)"
        configuration.connectionCount = max(1, connections)
        configuration.maxConnectionCount = max(1, connections)
        configuration.maxReceiveMessageSize = maxBodySize
        configuration.connectTimeout = .seconds(5)
        return configuration
    }
}

/// What is wrong with an HTTPS origin setting ("must be an https:// URL"); the caller names the setting.
public struct HTTPSOriginError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
