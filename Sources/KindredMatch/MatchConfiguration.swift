import Foundation
import KindredGRPCServices
import KindredServiceKit

/// Everything the match service can be configured with, read from `KINDRED_MATCH_*` (services/match/README.md).
public struct MatchConfiguration: Sendable {
    /// `KINDRED_MATCH_LISTEN` (default `127.0.0.1:50054`), `_ADMIN_LISTEN` (default port + 100, or `off`),
    /// `_TLS_CERT_FILE` / `_TLS_KEY_FILE`, `_ACCESS_LOG`: as for every server.
    public var endpoint = ServerEndpointSettings(defaultPort: MatchServerDefinition.defaultPort)
    /// `KINDRED_MATCH_DATABASE_URL`, `_DATABASE_POOL_SIZE` (1..500, default 10), `_MIGRATIONS_DIR`.
    public var database = DatabaseSettings(server: "match", schema: "match")
    /// `KINDRED_MATCH_AUTH_ADDRESS`, `_SERVICE_SECRET`, `_REVOCATION_STALE_MS`: how match reaches auth
    /// (`AuthClientSettings`).
    public var auth = AuthClientSettings()
    /// `KINDRED_MATCH_DISCOVERY_ADDRESS` (host:port, or replicas: a comma-separated list), default `127.0.0.1:50053`: discovery's CheckCandidates,
    /// asked before every swipe (a swipe is accepted only on a member the swiper's deck could show).
    public var discoveryAddress = ServiceAddress(host: "127.0.0.1", port: 50053)
    /// `KINDRED_MATCH_DISCOVERY_SHARDS` (host:port,… one per discovery shard, in shard order): when discovery runs
    /// as geographic shards, the candidate checks go to the shard owning the viewer's cell; unset: the one address.
    public var discoveryShardAddresses: [ServiceAddress]? = nil
    /// `KINDRED_MATCH_DISCOVERY_TIMEOUT_MS` (int, 50..10000), default 1000: the deadline of that check (or the
    /// swipe's own, if earlier). Without an answer the swipe answers UNAVAILABLE (retry), never unchecked.
    public var discoveryTimeout: Duration = .seconds(1)
    /// `KINDRED_MATCH_EVENT_CONSUMERS`, `_EVENT_POLL_MS`: where match's events go (`EventRelaySettings`).
    public var events = EventRelaySettings()
    /// `KINDRED_MATCH_SWIPE_BATCH` (int, 1..2000), default 256: most swipes committed in one transaction.
    public var swipeBatch = 256
    /// `KINDRED_MATCH_SWIPE_WRITERS` (int, 1..32), default 2: transactions committing swipe batches at once.
    public var swipeWriters = 2
    /// `KINDRED_MATCH_SWIPE_RATE` (swipes/s per user, decimal) and `KINDRED_MATCH_SWIPE_BURST` (int), default 10
    /// and 60: a person swipes a few times a second at most; scripts get RESOURCE_EXHAUSTED.
    public var swipeRate = 10.0
    public var swipeBurst = 60
    /// `KINDRED_MATCH_REPORTS_PER_HOUR` (int, 1..1000), default 20: reports a user may file per hour.
    public var reportsPerHour = 20
    /// `KINDRED_MATCH_BLOCK_PROPAGATION_MS` (int, 100..30000), default 3000: how long Block, Unblock and Unmatch
    /// wait for every consumer (discovery, chat, profile) to apply them before answering UNAVAILABLE (retry).
    public var blockPropagationTimeout: Duration = .seconds(3)
    /// `KINDRED_MATCH_MATCH_PROPAGATION_MS` (int, 100..30000), default 3000: how long a swipe that creates a match
    /// or connection waits for chat and profile to apply it (so either side's first message and card work at once)
    /// before answering UNAVAILABLE (retry: the swipe is recorded, and the retry is a replay).
    public var matchPropagationTimeout: Duration = .seconds(3)
    /// `KINDRED_MATCH_PAGE_TOKEN_SECRET` (string, 32..256), default none: the key of page tokens; without it the
    /// key is derived from the service secret (`PageToken.key`), the same at every replica and after restarts.
    public var pageTokenSecret: String?
    /// `KINDRED_MATCH_ACTIVITY_DURATION_MS` (int, 60000..86400000), default 7200000 (2 h): how long an activity
    /// broadcast shows in followers' Home.
    public var activityDuration: Duration = .seconds(7200)
    /// `KINDRED_MATCH_ACTIVITY_NOTIFY_INTERVAL_MS` (int, 1000..86400000), default 10800000 (3 h): the least time
    /// between two broadcasts of a member that push to their followers; a start within it shows but pushes nothing.
    public var activityNotifyInterval: Duration = .seconds(10800)

    public init() {}

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        try self.init(EnvironmentReader(environment))
    }

    public init(_ reader: EnvironmentReader) throws {
        self.endpoint = try MatchServerDefinition.endpoint(reader)
        self.database = try MatchServerDefinition.database(reader) ?? self.database
        self.auth = try AuthClientSettings(server: "match", environment: reader)
        self.events = try EventRelaySettings(server: "match", environment: reader)
        self.discoveryAddress = try reader.serviceAddress("KINDRED_MATCH_DISCOVERY_ADDRESS", default: self.discoveryAddress)
        self.discoveryShardAddresses = try DiscoveryShardRouter.addresses(reader, "KINDRED_MATCH_DISCOVERY_SHARDS")
        self.discoveryTimeout = try reader.milliseconds(
            "KINDRED_MATCH_DISCOVERY_TIMEOUT_MS", default: self.discoveryTimeout, in: 50...10_000)
        self.swipeBatch = try reader.int("KINDRED_MATCH_SWIPE_BATCH", default: self.swipeBatch, in: 1...2000)
        self.swipeWriters = try reader.int("KINDRED_MATCH_SWIPE_WRITERS", default: self.swipeWriters, in: 1...32)
        self.swipeRate = try reader.double("KINDRED_MATCH_SWIPE_RATE", default: self.swipeRate, in: 0.01...1_000_000)
        self.swipeBurst = try reader.int("KINDRED_MATCH_SWIPE_BURST", default: self.swipeBurst, in: 1...1_000_000)
        self.reportsPerHour = try reader.int("KINDRED_MATCH_REPORTS_PER_HOUR", default: self.reportsPerHour, in: 1...1000)
        self.pageTokenSecret = try reader.secret("KINDRED_MATCH_PAGE_TOKEN_SECRET", length: 32...256)
        self.blockPropagationTimeout = try reader.milliseconds(
            "KINDRED_MATCH_BLOCK_PROPAGATION_MS", default: self.blockPropagationTimeout, in: 100...30_000)
        self.matchPropagationTimeout = try reader.milliseconds(
            "KINDRED_MATCH_MATCH_PROPAGATION_MS", default: self.matchPropagationTimeout, in: 100...30_000)
        self.activityDuration = try reader.milliseconds(
            "KINDRED_MATCH_ACTIVITY_DURATION_MS", default: self.activityDuration, in: 60_000...86_400_000)
        self.activityNotifyInterval = try reader.milliseconds(
            "KINDRED_MATCH_ACTIVITY_NOTIFY_INTERVAL_MS", default: self.activityNotifyInterval, in: 1000...86_400_000)
    }
}
