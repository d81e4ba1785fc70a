import Foundation
import KindredArgon2
import KindredGRPCServices
import KindredServiceKit

/// Everything the auth service can be configured with. `init(environment:)` reads the
/// `KINDRED_AUTH_*` environment variables; every key, its type and default are listed here and in
/// `services/auth/README.md`.
public struct AuthConfiguration: Sendable {
    /// The gRPC port, the admin port, TLS and the access log, read like every server's (`ServerEndpointSettings`):
    /// `KINDRED_AUTH_LISTEN` (default `127.0.0.1:50051`), `KINDRED_AUTH_ADMIN_LISTEN` (default `127.0.0.1:50151`, or
    /// `off`), `KINDRED_AUTH_TLS_CERT_FILE` / `KINDRED_AUTH_TLS_KEY_FILE`, `KINDRED_AUTH_ACCESS_LOG` (default true).
    public var endpoint = ServerEndpointSettings(defaultPort: AuthServerDefinition.defaultPort)
    /// `KINDRED_AUTH_DATABASE_URL` (default `postgresql:///kindred`), `KINDRED_AUTH_DATABASE_POOL_SIZE` (1...500,
    /// default 10), `KINDRED_AUTH_MIGRATIONS_DIR` (default `services/auth/migrations`): see `DatabaseSettings`.
    public var database = DatabaseSettings(server: "auth", schema: "auth")
    /// `KINDRED_AUTH_DATA_DIR` (path), default `./.data/auth` (ignored by git): where a missing signing key is generated.
    public var dataDirectory = "./.data/auth"
    /// `KINDRED_AUTH_SIGNING_KEY_FILE` (path to an Ed25519 PKCS#8 PEM), default `<data dir>/signing-key.pem`;
    /// generated when missing.
    public var signingKeyFile: String?
    /// `KINDRED_AUTH_ACCESS_TOKEN_TTL_SECONDS` (int, 60...900), default 900.
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
    /// `KINDRED_AUTH_SMTP_USERNAME` / `KINDRED_AUTH_SMTP_PASSWORD` (strings; the password a secret, 1..1024), default none.
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
    /// `KINDRED_AUTH_SIGN_IN_FAILURES_PER_HOUR` (int 1...1_000_000), default 100: failed sign-ins per account per
    /// hour from all client addresses together; past it every address waits (`SignInBackoff`).
    public var signInFailuresPerHour = 100
    /// `KINDRED_AUTH_SIGN_IN_FREE_FAILURES` (int 0...1000), default 5: failures per (account, client address)
    /// within an hour before that address's exponential backoff starts; other addresses are not held.
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
    /// `KINDRED_AUTH_OIDC_JWKS_FILE` (path to a JWKS JSON file), default none;
    /// `KINDRED_AUTH_OIDC_JWKS_URLS` (comma-separated https URLs of JWKS documents, fetched and cached by their
    /// Cache-Control, refreshed on an unknown key id at most once a minute), default Google's and Apple's
    /// (`oidcDefaultJWKSURLs`) when no JWKS file is set, none when one is (tests, air-gapped sites);
    /// `KINDRED_AUTH_OIDC_JWKS_CA_FILE` (PEM), default none: the CA the JWKS servers' certificates must chain to
    /// instead of the system store (a local peer).
    public var oidcIssuers: Set<String> = ["https://accounts.google.com", "https://appleid.apple.com"]
    public var oidcAudiences: Set<String> = []
    public var oidcJWKSFile: String?
    public var oidcJWKSURLs: [String]?
    public var oidcJWKSCAFile: String?
    public static let oidcDefaultJWKSURLs = [
        "https://www.googleapis.com/oauth2/v3/certs", "https://appleid.apple.com/auth/keys",
    ]

    /// The JWKS documents to fetch: the configured ones, else the providers' own unless a key file replaces them.
    public var effectiveOIDCJWKSURLs: [String] {
        self.oidcJWKSURLs ?? (self.oidcJWKSFile == nil ? Self.oidcDefaultJWKSURLs : [])
    }

    /// `KINDRED_AUTH_SERVICE_SECRET_<NAME>` (string, 32..256) for NAME in GATEWAY, PROFILE, DISCOVERY, MATCH,
    /// CHAT, NOTIFY, default none: the secret each service presents to IssueServiceToken. Unset = that service cannot
    /// obtain tokens.
    public var serviceSecrets: [String: String] = [:]
    public static let serviceNames = ["gateway", "profile", "discovery", "match", "chat", "notify"]

    /// `KINDRED_AUTH_EVENT_CONSUMERS`, `_EVENT_POLL_MS`: where auth's events go (`EventRelaySettings`).
    public var events = EventRelaySettings()

    public init() {}

    /// Reads the `KINDRED_AUTH_*` settings; a bad value throws `ConfigurationError` naming the key.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        try self.init(EnvironmentReader(environment))
    }

    public init(_ reader: EnvironmentReader) throws {
        let day: Int64 = 86_400
        self.endpoint = try AuthServerDefinition.endpoint(reader)
        self.database = try AuthServerDefinition.database(reader) ?? self.database
        self.events = try EventRelaySettings(server: "auth", environment: reader)
        self.dataDirectory = reader.string("KINDRED_AUTH_DATA_DIR") ?? self.dataDirectory
        self.signingKeyFile = reader.string("KINDRED_AUTH_SIGNING_KEY_FILE")
        self.accessTokenLifetime = try reader.seconds(
            "KINDRED_AUTH_ACCESS_TOKEN_TTL_SECONDS", default: self.accessTokenLifetime, in: 60...900)
        self.refreshTokenLifetime = try reader.seconds(
            "KINDRED_AUTH_REFRESH_TOKEN_TTL_SECONDS", default: self.refreshTokenLifetime, in: 60...(365 * day))
        self.sessionMaxLifetime = try reader.seconds(
            "KINDRED_AUTH_SESSION_MAX_SECONDS", default: self.sessionMaxLifetime, in: 60...(365 * day))
        self.verifyEmailTokenLifetime = try reader.seconds(
            "KINDRED_AUTH_VERIFY_TOKEN_TTL_SECONDS", default: self.verifyEmailTokenLifetime, in: 60...(30 * day))
        self.resetTokenLifetime = try reader.seconds(
            "KINDRED_AUTH_RESET_TOKEN_TTL_SECONDS", default: self.resetTokenLifetime, in: 60...day)
        self.emailChangeTokenLifetime = try reader.seconds(
            "KINDRED_AUTH_EMAIL_CHANGE_TOKEN_TTL_SECONDS", default: self.emailChangeTokenLifetime, in: 60...day)
        self.recentSignInWindow = try reader.seconds(
            "KINDRED_AUTH_RECENT_SIGN_IN_SECONDS", default: self.recentSignInWindow, in: 0...day)
        self.argon2.memoryKiB = UInt32(
            try reader.int("KINDRED_AUTH_ARGON2_MEMORY_KIB", default: Int(self.argon2.memoryKiB), in: 8...4_194_304))
        self.argon2.iterations = UInt32(
            try reader.int("KINDRED_AUTH_ARGON2_ITERATIONS", default: Int(self.argon2.iterations), in: 1...100))
        self.argon2.parallelism = UInt32(
            try reader.int("KINDRED_AUTH_ARGON2_PARALLELISM", default: Int(self.argon2.parallelism), in: 1...64))
        self.hashThreads = try reader.int("KINDRED_AUTH_HASH_THREADS", default: self.hashThreads, in: 1...256)
        self.smtpHost = reader.string("KINDRED_AUTH_SMTP_HOST") ?? self.smtpHost
        self.smtpPort = try reader.int("KINDRED_AUTH_SMTP_PORT", default: self.smtpPort, in: 1...65_535)
        self.smtpSecurity = try reader.choice(
            "KINDRED_AUTH_SMTP_SECURITY", default: self.smtpSecurity,
            ["none": "none", "starttls": "starttls", "tls": "tls"])
        self.smtpUsername = reader.string("KINDRED_AUTH_SMTP_USERNAME")
        self.smtpPassword = try reader.secret("KINDRED_AUTH_SMTP_PASSWORD", length: 1...1024)
        self.mailFrom = reader.string("KINDRED_AUTH_MAIL_FROM") ?? self.mailFrom
        self.linkBaseURL = reader.string("KINDRED_AUTH_LINK_BASE_URL") ?? self.linkBaseURL
        self.mailPollInterval = try reader.milliseconds(
            "KINDRED_AUTH_MAIL_POLL_MS", default: self.mailPollInterval, in: 10...3_600_000)
        self.mailMaxAttempts = try reader.int("KINDRED_AUTH_MAIL_MAX_ATTEMPTS", default: self.mailMaxAttempts, in: 1...100)
        self.revocationStaleAfter = try AuthClientSettings.revocationStaleAfter(server: "auth", environment: reader)
        self.mailRetention = try reader.seconds(
            "KINDRED_AUTH_MAIL_RETENTION_SECONDS", default: self.mailRetention, in: 3_600...(3_650 * day))
        self.signInFailuresPerHour = try reader.int(
            "KINDRED_AUTH_SIGN_IN_FAILURES_PER_HOUR", default: self.signInFailuresPerHour, in: 1...1_000_000)
        self.signInFreeFailures = try reader.int(
            "KINDRED_AUTH_SIGN_IN_FREE_FAILURES", default: self.signInFreeFailures, in: 0...1_000)
        self.ipRequestsPerMinute = try reader.int(
            "KINDRED_AUTH_IP_REQUESTS_PER_MINUTE", default: self.ipRequestsPerMinute, in: 1...1_000_000)
        self.mailsPerAddressPerDay = try reader.int(
            "KINDRED_AUTH_MAIL_PER_ADDRESS_PER_DAY", default: self.mailsPerAddressPerDay, in: 1...1_000)
        self.mailsPerIPPerHour = try reader.int(
            "KINDRED_AUTH_MAIL_PER_IP_PER_HOUR", default: self.mailsPerIPPerHour, in: 1...1_000_000)
        self.bootstrapSecret = try reader.secret("KINDRED_AUTH_BOOTSTRAP_SECRET", length: 32...256)
        self.oidcIssuers = reader.list("KINDRED_AUTH_OIDC_ISSUERS", default: self.oidcIssuers)
        self.oidcAudiences = reader.list("KINDRED_AUTH_OIDC_AUDIENCES", default: self.oidcAudiences)
        self.oidcJWKSFile = reader.string("KINDRED_AUTH_OIDC_JWKS_FILE")
        self.oidcJWKSURLs = reader.string("KINDRED_AUTH_OIDC_JWKS_URLS").map { text in
            text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        self.oidcJWKSCAFile = reader.string("KINDRED_AUTH_OIDC_JWKS_CA_FILE")
        for name in Self.serviceNames {
            let key = "KINDRED_AUTH_SERVICE_SECRET_" + name.uppercased()
            self.serviceSecrets[name] = try reader.secret(key, length: 32...256)
        }
    }

    /// The signing key path: the configured file, else `<data dir>/signing-key.pem`.
    public var effectiveSigningKeyFile: String {
        self.signingKeyFile ?? (self.dataDirectory as NSString).appendingPathComponent("signing-key.pem")
    }

}
