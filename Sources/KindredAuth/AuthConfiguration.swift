import Foundation
import KindredArgon2
import KindredGRPCServices

/// Everything the auth service can be configured with. `init(environment:)` reads the
/// `KINDRED_AUTH_*` environment variables; every key, its type and default are listed here and in
/// `services/auth/README.md`.
public struct AuthConfiguration: Sendable {
    /// `KINDRED_AUTH_LISTEN` (host:port), default `127.0.0.1:50051`.
    public var listenHost = "127.0.0.1"
    public var listenPort = 50051
    /// `KINDRED_AUTH_ADMIN_LISTEN` (host:port, or `off`), default `127.0.0.1:50151`: Prometheus text at `/metrics`,
    /// `/healthz`.
    public var adminListen: HostPort? = HostPort(host: "127.0.0.1", port: 50151)
    /// `KINDRED_AUTH_TLS_CERT_FILE` / `KINDRED_AUTH_TLS_KEY_FILE` (PEM paths), default none: TLS (ALPN h2) when
    /// both are set, h2c otherwise.
    public var tlsCertificateFile: String?
    public var tlsKeyFile: String?
    /// `KINDRED_AUTH_ACCESS_LOG` (bool), default true: one info line per finished call.
    public var accessLog = true
    /// `KINDRED_AUTH_DATABASE_URL` (libpq URL or conninfo), default `postgresql:///kindred`.
    public var databaseURL = "postgresql:///kindred"
    /// `KINDRED_AUTH_DATABASE_POOL_SIZE` (int), default 10.
    public var databasePoolSize = 10
    /// `KINDRED_AUTH_DATA_DIR` (path), default `./.data/auth` (ignored by git): where a missing signing key is generated.
    public var dataDirectory = "./.data/auth"
    /// `KINDRED_AUTH_SIGNING_KEY_FILE` (path to an Ed25519 PKCS#8 PEM), default `<data dir>/signing-key.pem`;
    /// generated when missing.
    public var signingKeyFile: String?
    /// `KINDRED_AUTH_ACCESS_TOKEN_TTL_SECONDS` (int, 60..900), default 900.
    public var accessTokenLifetime: Int64 = 900
    /// `KINDRED_AUTH_REFRESH_TOKEN_TTL_SECONDS` (int), default 2,592,000 (30 days).
    public var refreshTokenLifetime: Int64 = 30 * 86_400
    /// `KINDRED_AUTH_SESSION_MAX_SECONDS` (int), default 2,592,000 (30 days): absolute session lifetime.
    public var sessionMaxLifetime: Int64 = 30 * 86_400
    /// `KINDRED_AUTH_VERIFY_TOKEN_TTL_SECONDS` (int), default 86,400 (24 h).
    public var verifyEmailTokenLifetime: Int64 = 86_400
    /// `KINDRED_AUTH_RESET_TOKEN_TTL_SECONDS` (int), default 1,800 (30 min).
    public var resetTokenLifetime: Int64 = 1_800
    /// `KINDRED_AUTH_EMAIL_CHANGE_TOKEN_TTL_SECONDS` (int), default 3,600 (1 h).
    public var emailChangeTokenLifetime: Int64 = 3_600
    /// `KINDRED_AUTH_RECENT_SIGN_IN_SECONDS` (int), default 600: for accounts without a password, how recent the
    /// session's SignInWithIdToken must be for ChangeEmail and DeleteAccount (accounts with a password always
    /// give it).
    public var recentSignInWindow: Int64 = 600
    /// `KINDRED_AUTH_REVOCATION_STALE_MS` (int, 2000..60000), default 5000: how long auth trusts its set of
    /// ended sessions without news from its LISTEN connection (heartbeat every second); past it, calls with a
    /// user token answer UNAVAILABLE (fail closed).
    public var revocationStaleAfter: Duration = .seconds(5)
    /// `KINDRED_AUTH_MAIL_RETENTION_SECONDS` (int >= 3600), default 2,592,000 (30 days): how long the
    /// remains of a delivered or failed mail (address hash, template, timestamps, outcome) are kept. The body
    /// and the address are erased as soon as the relay has the outcome.
    public var mailRetention: Int64 = 2_592_000
    /// `KINDRED_AUTH_ARGON2_MEMORY_KIB` (int), default 19456; `KINDRED_AUTH_ARGON2_ITERATIONS` (int), default 2;
    /// `KINDRED_AUTH_ARGON2_PARALLELISM` (int), default 1 (OWASP). Lower values are for tests only.
    public var argon2 = Argon2id.Parameters.owasp
    /// `KINDRED_AUTH_HASH_THREADS` (int), default the number of cores: concurrent Argon2 computations.
    public var hashThreads = ProcessInfo.processInfo.activeProcessorCount
    /// `KINDRED_AUTH_SMTP_HOST` (string), default `127.0.0.1`; `KINDRED_AUTH_SMTP_PORT` (int), default 25;
    /// `KINDRED_AUTH_SMTP_SECURITY` (`none` | `starttls` | `tls`), default `starttls`;
    /// `KINDRED_AUTH_SMTP_USERNAME` / `KINDRED_AUTH_SMTP_PASSWORD` (strings), default none.
    public var smtpHost = "127.0.0.1"
    public var smtpPort = 25
    public var smtpSecurity = "starttls"
    public var smtpUsername: String?
    public var smtpPassword: String?
    /// `KINDRED_AUTH_MAIL_FROM` (address), default `no-reply@kindred.invalid`.
    public var mailFrom = "no-reply@kindred.invalid"
    /// `KINDRED_AUTH_LINK_BASE_URL` (URL), default `https://kindred.invalid`: base of links in emails.
    public var linkBaseURL = "https://kindred.invalid"
    /// `KINDRED_AUTH_MAIL_POLL_MS` (int), default 1000: how often the mail relay looks for work when idle.
    public var mailPollInterval: Duration = .seconds(1)
    /// `KINDRED_AUTH_MAIL_MAX_ATTEMPTS` (int), default 12: transient SMTP failures retried with backoff.
    public var mailMaxAttempts = 12
    /// `KINDRED_AUTH_SIGN_IN_FAILURES_PER_HOUR` (int), default 100: failed sign-ins per account per hour.
    public var signInFailuresPerHour = 100
    /// `KINDRED_AUTH_SIGN_IN_FREE_FAILURES` (int), default 5: failures before exponential backoff starts.
    public var signInFreeFailures = 5
    /// `KINDRED_AUTH_IP_REQUESTS_PER_MINUTE` (int), default 60: sign-in/sign-up attempts per client address.
    public var ipRequestsPerMinute = 60
    /// `KINDRED_AUTH_MAIL_PER_ADDRESS_PER_DAY` (int), default 5: mails triggered per address per day, at most
    /// one per minute.
    public var mailsPerAddressPerDay = 5
    /// `KINDRED_AUTH_MAIL_PER_IP_PER_HOUR` (int), default 30: mail-sending requests per client address.
    public var mailsPerIPPerHour = 30
    /// `KINDRED_AUTH_BOOTSTRAP_SECRET` (string, 32..256), default none (BootstrapAdmin disabled).
    public var bootstrapSecret: String?
    /// `KINDRED_AUTH_OIDC_ISSUERS` (comma-separated), default `https://accounts.google.com,https://appleid.apple.com`;
    /// `KINDRED_AUTH_OIDC_AUDIENCES` (comma-separated client ids), default none (SignInWithIdToken disabled);
    /// `KINDRED_AUTH_OIDC_JWKS_FILE` (path to a JWKS JSON file), default none.
    public var oidcIssuers: Set<String> = ["https://accounts.google.com", "https://appleid.apple.com"]
    public var oidcAudiences: Set<String> = []
    public var oidcJWKSFile: String?

    /// `KINDRED_AUTH_SERVICE_SECRET_<NAME>` (string, 32..256) for NAME in GATEWAY, PROFILE, DISCOVERY, MATCH,
    /// CHAT, default none: the secret each service presents to IssueServiceToken. Unset = that service cannot
    /// obtain tokens.
    public var serviceSecrets: [String: String] = [:]
    public static let serviceNames = ["gateway", "profile", "discovery", "match", "chat"]

    public init() {}

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        func string(_ key: String) -> String? {
            guard let value = environment[key]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
            return value
        }
        func int(_ key: String) throws -> Int? {
            guard let text = string(key) else { return nil }
            guard let value = Int(text) else { throw ConfigurationError(key: key, problem: "must be an integer") }
            return value
        }
        if let listen = string("KINDRED_AUTH_LISTEN") {
            guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]) else {
                throw ConfigurationError(key: "KINDRED_AUTH_LISTEN", problem: "must be host:port")
            }
            self.listenHost = String(listen[..<colon])
            self.listenPort = port
        }
        let reader = EnvironmentReader(environment)
        self.adminListen = try reader.optionalAddress("KINDRED_AUTH_ADMIN_LISTEN", default: self.adminListen)
        self.tlsCertificateFile = string("KINDRED_AUTH_TLS_CERT_FILE")
        self.tlsKeyFile = string("KINDRED_AUTH_TLS_KEY_FILE")
        guard (self.tlsCertificateFile == nil) == (self.tlsKeyFile == nil) else {
            throw ConfigurationError(key: "KINDRED_AUTH_TLS_CERT_FILE", problem: "and KINDRED_AUTH_TLS_KEY_FILE must be set together")
        }
        self.accessLog = try reader.bool("KINDRED_AUTH_ACCESS_LOG", default: true)
        if let value = string("KINDRED_AUTH_DATABASE_URL") { self.databaseURL = value }
        if let value = try int("KINDRED_AUTH_DATABASE_POOL_SIZE") { self.databasePoolSize = value }
        if let value = string("KINDRED_AUTH_DATA_DIR") { self.dataDirectory = value }
        self.signingKeyFile = string("KINDRED_AUTH_SIGNING_KEY_FILE")
        if let value = try int("KINDRED_AUTH_ACCESS_TOKEN_TTL_SECONDS") {
            guard (60...900).contains(value) else {
                throw ConfigurationError(key: "KINDRED_AUTH_ACCESS_TOKEN_TTL_SECONDS", problem: "must be 60..900")
            }
            self.accessTokenLifetime = Int64(value)
        }
        if let value = try int("KINDRED_AUTH_REFRESH_TOKEN_TTL_SECONDS") { self.refreshTokenLifetime = Int64(value) }
        if let value = try int("KINDRED_AUTH_SESSION_MAX_SECONDS") { self.sessionMaxLifetime = Int64(value) }
        if let value = try int("KINDRED_AUTH_VERIFY_TOKEN_TTL_SECONDS") { self.verifyEmailTokenLifetime = Int64(value) }
        if let value = try int("KINDRED_AUTH_RESET_TOKEN_TTL_SECONDS") { self.resetTokenLifetime = Int64(value) }
        if let value = try int("KINDRED_AUTH_EMAIL_CHANGE_TOKEN_TTL_SECONDS") {
            self.emailChangeTokenLifetime = Int64(value)
        }
        if let value = try int("KINDRED_AUTH_RECENT_SIGN_IN_SECONDS") { self.recentSignInWindow = Int64(value) }
        if let value = try int("KINDRED_AUTH_ARGON2_MEMORY_KIB") { self.argon2.memoryKiB = UInt32(value) }
        if let value = try int("KINDRED_AUTH_ARGON2_ITERATIONS") { self.argon2.iterations = UInt32(value) }
        if let value = try int("KINDRED_AUTH_ARGON2_PARALLELISM") { self.argon2.parallelism = UInt32(value) }
        if let value = try int("KINDRED_AUTH_HASH_THREADS") { self.hashThreads = max(1, value) }
        if let value = string("KINDRED_AUTH_SMTP_HOST") { self.smtpHost = value }
        if let value = try int("KINDRED_AUTH_SMTP_PORT") { self.smtpPort = value }
        if let value = string("KINDRED_AUTH_SMTP_SECURITY") {
            guard ["none", "starttls", "tls"].contains(value) else {
                throw ConfigurationError(key: "KINDRED_AUTH_SMTP_SECURITY", problem: "must be none, starttls or tls")
            }
            self.smtpSecurity = value
        }
        self.smtpUsername = string("KINDRED_AUTH_SMTP_USERNAME")
        self.smtpPassword = string("KINDRED_AUTH_SMTP_PASSWORD")
        if let value = string("KINDRED_AUTH_MAIL_FROM") { self.mailFrom = value }
        if let value = string("KINDRED_AUTH_LINK_BASE_URL") { self.linkBaseURL = value }
        if let value = try int("KINDRED_AUTH_MAIL_POLL_MS") { self.mailPollInterval = .milliseconds(value) }
        if let value = try int("KINDRED_AUTH_MAIL_MAX_ATTEMPTS") { self.mailMaxAttempts = value }
        if let value = try int("KINDRED_AUTH_REVOCATION_STALE_MS") {
            guard (2000...60000).contains(value) else {
                throw ConfigurationError(key: "KINDRED_AUTH_REVOCATION_STALE_MS", problem: "must be 2000..60000")
            }
            self.revocationStaleAfter = .milliseconds(value)
        }
        if let value = try int("KINDRED_AUTH_MAIL_RETENTION_SECONDS") {
            guard value >= 3600 else {
                throw ConfigurationError(key: "KINDRED_AUTH_MAIL_RETENTION_SECONDS", problem: "must be at least 3600")
            }
            self.mailRetention = Int64(value)
        }
        if let value = try int("KINDRED_AUTH_SIGN_IN_FAILURES_PER_HOUR") { self.signInFailuresPerHour = value }
        if let value = try int("KINDRED_AUTH_SIGN_IN_FREE_FAILURES") { self.signInFreeFailures = value }
        if let value = try int("KINDRED_AUTH_IP_REQUESTS_PER_MINUTE") { self.ipRequestsPerMinute = value }
        if let value = try int("KINDRED_AUTH_MAIL_PER_ADDRESS_PER_DAY") { self.mailsPerAddressPerDay = value }
        if let value = try int("KINDRED_AUTH_MAIL_PER_IP_PER_HOUR") { self.mailsPerIPPerHour = value }
        self.bootstrapSecret = string("KINDRED_AUTH_BOOTSTRAP_SECRET")
        if let value = string("KINDRED_AUTH_OIDC_ISSUERS") { self.oidcIssuers = Self.list(value) }
        if let value = string("KINDRED_AUTH_OIDC_AUDIENCES") { self.oidcAudiences = Self.list(value) }
        self.oidcJWKSFile = string("KINDRED_AUTH_OIDC_JWKS_FILE")
        for name in Self.serviceNames {
            let key = "KINDRED_AUTH_SERVICE_SECRET_" + name.uppercased()
            guard let secret = string(key) else { continue }
            guard (32...256).contains(secret.count) else {
                throw ConfigurationError(key: key, problem: "must be 32..256 characters")
            }
            self.serviceSecrets[name] = secret
        }
        if let secret = self.bootstrapSecret, !(32...256).contains(secret.count) {
            throw ConfigurationError(key: "KINDRED_AUTH_BOOTSTRAP_SECRET", problem: "must be 32..256 characters")
        }
    }

    /// The signing key path: the configured file, else `<data dir>/signing-key.pem`.
    public var effectiveSigningKeyFile: String {
        self.signingKeyFile ?? (self.dataDirectory as NSString).appendingPathComponent("signing-key.pem")
    }

    private static func list(_ value: String) -> Set<String> {
        Set(value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
    }
}

