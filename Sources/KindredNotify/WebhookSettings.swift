import KindredGRPCServices

/// The webhook settings of `NotifyConfiguration` (`configuration.webhooks`), read from `KINDRED_NOTIFY_WEBHOOK_*`
/// (services/notify/README.md lists the same keys).
public struct WebhookSettings: Sendable {
    /// `KINDRED_NOTIFY_WEBHOOK_HTTP_HOSTS` (comma-separated host names), default `localhost,127.0.0.1,::1`: the
    /// hosts an endpoint may name with `http://` (h2 in clear text) when private hosts are allowed; every other
    /// host, and every host otherwise, needs https.
    public var httpHosts: Set<String> = ["localhost", "127.0.0.1", "::1"]
    /// `KINDRED_NOTIFY_WEBHOOK_ALLOW_PRIVATE_HOSTS` (bool), default false: endpoints on loopback, private and
    /// link-local hosts (``WebhookAddressPolicy``), and `http://` to the hosts above. For development and tests
    /// only (run-cluster sets it, compose does not): otherwise such a URL is refused at registration
    /// (INVALID_ARGUMENT, HOST_NOT_ALLOWED) and a connection that reaches such an address is closed before a byte
    /// is sent.
    public var allowPrivateHosts = false
    /// `KINDRED_NOTIFY_WEBHOOK_CA_FILE` (path), default the system's roots: the CA endpoints' certificates must
    /// chain to (local receivers in tests).
    public var trustRootsFile: String?
    /// `KINDRED_NOTIFY_WEBHOOK_TIMEOUT_MS` (int, 100..60000), default 10000: how long one attempt may take before
    /// it counts as failed; a slow endpoint waits alone, others go on.
    public var timeout: Duration = .seconds(10)
    /// `KINDRED_NOTIFY_WEBHOOK_RETRY_FIRST_MS` (int, 10..600000), default 5000: the first retry's delay (then ×3
    /// per attempt, at most 3 h, with ±20 % jitter).
    public var firstRetryDelay: Duration = .seconds(5)
    /// `KINDRED_NOTIFY_WEBHOOK_RETRY_FOR_MS` (int, 1000..604800000), default 86400000 (a day): how long a delivery
    /// is retried before it is failed (kept for replay).
    public var retryFor: Duration = .seconds(86_400)
    /// `KINDRED_NOTIFY_WEBHOOK_SECRET_GRACE_MS` (int, 0..604800000), default 86400000 (a day): how long a rotated
    /// secret keeps signing alongside the new one.
    public var secretGrace: Duration = .seconds(86_400)
    /// `KINDRED_NOTIFY_WEBHOOK_RETENTION_DAYS` (int, 1..365), default 7: delivered and failed deliveries older than
    /// this are purged (with their bodies).
    public var retentionDays = 7
    /// `KINDRED_NOTIFY_WEBHOOK_POLL_MS` (int, 50..60000), default 500: how often the webhook sender looks for due
    /// deliveries when there were none.
    public var pollInterval: Duration = .milliseconds(500)

    /// `KINDRED_NOTIFY_WEBHOOK_KEY` (or `_FILE`; 32..256 characters of random material), default none: the key
    /// endpoints' signing secrets are sealed with at rest (AES-256-GCM, ``WebhookSecretKey``). Unset: creating an
    /// endpoint or rotating a secret answers FAILED_PRECONDITION, and notify does not start while endpoints exist.
    public var secretKey: WebhookSecretKey?

    public init() {}

    public init(_ reader: EnvironmentReader) throws {
        self.httpHosts = Set(
            reader.list("KINDRED_NOTIFY_WEBHOOK_HTTP_HOSTS", default: self.httpHosts).map { $0.lowercased() }
        )
        self.allowPrivateHosts = try reader.bool("KINDRED_NOTIFY_WEBHOOK_ALLOW_PRIVATE_HOSTS", default: false)
        self.trustRootsFile = reader.string("KINDRED_NOTIFY_WEBHOOK_CA_FILE")
        self.secretKey = try reader.secret(WebhookSecretsAtRest.setting, length: 32...256).map(WebhookSecretKey.init(text:))
        self.timeout = try reader.milliseconds(
            "KINDRED_NOTIFY_WEBHOOK_TIMEOUT_MS",
            default: self.timeout,
            in: 100...60_000
        )
        self.firstRetryDelay = try reader.milliseconds(
            "KINDRED_NOTIFY_WEBHOOK_RETRY_FIRST_MS",
            default: self.firstRetryDelay,
            in: 10...600_000
        )
        self.retryFor = try reader.milliseconds(
            "KINDRED_NOTIFY_WEBHOOK_RETRY_FOR_MS",
            default: self.retryFor,
            in: 1_000...604_800_000
        )
        self.secretGrace = try reader.milliseconds(
            "KINDRED_NOTIFY_WEBHOOK_SECRET_GRACE_MS",
            default: self.secretGrace,
            in: 0...604_800_000
        )
        self.retentionDays = try reader.int(
            "KINDRED_NOTIFY_WEBHOOK_RETENTION_DAYS",
            default: self.retentionDays,
            in: 1...365
        )
        self.pollInterval = try reader.milliseconds(
            "KINDRED_NOTIFY_WEBHOOK_POLL_MS",
            default: self.pollInterval,
            in: 50...60_000
        )
    }

    /// The retry schedule these settings make.
    var schedule: WebhookRetrySchedule {
        var schedule = WebhookRetrySchedule()
        schedule.firstDelay = self.firstRetryDelay
        schedule.giveUpAfter = self.retryFor
        return schedule
    }
}
