import KindredGRPC
import KindredOpenSSL
import NIOCore

/// An endpoint's URL as notify posts to it: `https://host[:port]/path` (TLS with ALPN h2) on a public host
/// (``WebhookAddressPolicy``: no loopback, private, link-local, unspecified or multicast IP literal, no
/// `localhost`). Only with `KINDRED_NOTIFY_WEBHOOK_ALLOW_PRIVATE_HOSTS` (development and tests) may it name such a
/// host, and `http://` (h2 in clear text) a host of `KINDRED_NOTIFY_WEBHOOK_HTTP_HOSTS`. No user info, no
/// fragment, no spaces, at most 2048 characters. The endpoint must speak HTTP/2: notify's client is the runtime's
/// HTTP/2 client, so an HTTP/1.1-only endpoint fails every attempt with `last_error` saying so.
struct WebhookURL: Sendable, Hashable {
    let secure: Bool
    let host: String
    let port: Int
    /// The path and query, "/" at least.
    let path: String
    let text: String

    static let maxLength = 2048

    /// The reason `text` is refused, as a field violation's hint.
    struct Invalid: Error, Equatable {
        let hint: String
        /// The field violation's reason: MALFORMED, or HOST_NOT_ALLOWED for a host on the deployment's side.
        var reason = "MALFORMED"
    }

    init(_ text: String, httpHosts: Set<String>, allowPrivateHosts: Bool = false) throws(Invalid) {
        guard !text.isEmpty, text.utf8.count <= Self.maxLength else { throw Invalid(hint: "1..2048 characters") }
        guard !text.contains(where: { $0.isWhitespace || $0 == "#" || !$0.isASCII || $0.asciiValue! < 0x21 }) else {
            throw Invalid(hint: "no spaces, control characters, fragment or non-ASCII characters")
        }
        let secure = text.lowercased().hasPrefix("https://")
        guard secure || text.lowercased().hasPrefix("http://") else { throw Invalid(hint: "an https:// URL") }
        // HTTPSOrigin parses host, port and path the same way for both schemes.
        let asHTTPS = secure ? text : "https://" + text.dropFirst("http://".count)
        let origin: HTTPSOrigin
        let path: String
        do {
            (origin, path) = try HTTPSOrigin.split(asHTTPS)
        } catch {
            throw Invalid(hint: "https://host[:port]/path")
        }
        let host = origin.host.lowercased()
        var port = origin.port
        if !secure {
            guard allowPrivateHosts, httpHosts.contains(host) else {
                throw Invalid(hint: "an https:// URL (http:// only in development, for the hosts it allows)")
            }
            // HTTPSOrigin defaults to 443; http's default is 80.
            if !asHTTPS.dropFirst("https://".count).prefix(while: { $0 != "/" }).contains(":") { port = 80 }
        }
        guard allowPrivateHosts || WebhookAddressPolicy.allows(host: host) else {
            throw Invalid(hint: WebhookAddressPolicy.hint, reason: "HOST_NOT_ALLOWED")
        }
        self.secure = secure
        self.host = host
        self.port = port
        self.path = path
        self.text = text
    }

    /// The origin as a key for one client per origin.
    var origin: String { "\(self.secure ? "https" : "http")://\(self.host):\(self.port)" }

    /// The HTTP/2 client configuration for this URL's origin: TLS checked against `trustRootsFile` (or the system
    /// roots) for https, h2 in clear text for http; `addressCheck` judges the address each connection reaches.
    func clientConfiguration(trustRootsFile: String?, addressCheck: (@Sendable (SocketAddress) -> Bool)?) throws
        -> HTTP2ClientConfiguration
    {
        if self.secure {
            var configuration = try HTTPSOrigin(
                "https://\(self.host.contains(":") ? "[\(self.host)]" : self.host):\(self.port)"
            ).clientConfiguration(trustRootsFile: trustRootsFile, connections: 1)
            configuration.addressCheck = addressCheck
            return configuration
        }
        var configuration = HTTP2ClientConfiguration(host: self.host, port: self.port, tls: nil)
        configuration.addressCheck = addressCheck
        configuration.authority = "\(self.host):\(self.port)"
        configuration.connectionCount = 1
        configuration.maxConnectionCount = 1
        configuration.maxReceiveMessageSize = 64 << 10
        configuration.connectTimeout = .seconds(5)
        return configuration
    }
}
