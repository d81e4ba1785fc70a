import KindredOpenSSL

/// Where and how ``SMTPClient`` delivers mail.
///
/// | Key | Type | Default |
/// |---|---|---|
/// | `host` | String: DNS name or IP literal of the relay, also the TLS server name | required |
/// | `port` | Int | `587` for `.startTLS`, `465` for `.implicitTLS`, `25` for `.none` |
/// | `security` | ``Security`` | `.startTLS(required: true)` |
/// | `trustRoots` | `TLSConfiguration.TrustRoots` (CAs the relay's certificate must chain to) | `.systemDefault` |
/// | `credentials` | ``Credentials``? (AUTH PLAIN, else AUTH LOGIN) | `nil` (no AUTH) |
/// | `allowInsecureAuth` | Bool: send credentials without TLS (local test relays only) | `false` |
/// | `heloDomain` | String: the name sent with EHLO/HELO | `"localhost"` |
/// | `connectTimeout` | Duration: TCP connect | 10 s |
/// | `commandTimeout` | Duration: each reply (greeting included) and the TLS handshake | 30 s |
public struct SMTPConfiguration: Sendable {
    /// How the connection is protected.
    public enum Security: Sendable, Hashable {
        /// Plain TCP throughout; for local sinks and test relays.
        case none
        /// Plain TCP, upgraded with STARTTLS (RFC 3207) after the first EHLO. With
        /// `required: false`, a server that offers no STARTTLS gets the mail in plain text
        /// (credentials are still never sent unless ``SMTPConfiguration/allowInsecureAuth``).
        case startTLS(required: Bool)
        /// TLS from the first byte (RFC 8314 "submissions", port 465).
        case implicitTLS
    }

    /// A user name and password for SMTP AUTH. Its descriptions and mirror hide the password, so
    /// printing a configuration does not leak it.
    public struct Credentials: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
        CustomReflectable
    {
        public var username: String
        public var password: String

        public init(username: String, password: String) {
            self.username = username
            self.password = password
        }

        public var description: String { "Credentials(username: \(self.username), password: <redacted>)" }
        public var debugDescription: String { self.description }
        public var customMirror: Mirror { Mirror(self, children: ["username": self.username]) }
    }

    public var host: String
    public var port: Int
    public var security: Security
    public var trustRoots: TLSConfiguration.TrustRoots
    public var credentials: Credentials?
    public var allowInsecureAuth: Bool
    public var heloDomain: String
    public var connectTimeout: Duration
    public var commandTimeout: Duration

    /// - Parameter port: nil picks the standard port for `security` (587, 465 or 25).
    public init(
        host: String,
        port: Int? = nil,
        security: Security = .startTLS(required: true),
        trustRoots: TLSConfiguration.TrustRoots = .systemDefault,
        credentials: Credentials? = nil,
        allowInsecureAuth: Bool = false,
        heloDomain: String = "localhost",
        connectTimeout: Duration = .seconds(10),
        commandTimeout: Duration = .seconds(30)
    ) {
        self.host = host
        self.port = port ?? Self.defaultPort(for: security)
        self.security = security
        self.trustRoots = trustRoots
        self.credentials = credentials
        self.allowInsecureAuth = allowInsecureAuth
        self.heloDomain = heloDomain
        self.connectTimeout = connectTimeout
        self.commandTimeout = commandTimeout
    }

    public static func defaultPort(for security: Security) -> Int {
        switch security {
        case .none: 25
        case .startTLS: 587
        case .implicitTLS: 465
        }
    }
}
