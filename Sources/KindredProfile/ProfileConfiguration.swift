import Foundation
import KindredGRPCServices
import KindredServiceKit

/// Everything the profile service can be configured with, read from `KINDRED_PROFILE_*` (services/profile/README.md
/// lists the same keys).
public struct ProfileConfiguration: Sendable {
    /// `KINDRED_PROFILE_LISTEN` (default `127.0.0.1:50052`), `_ADMIN_LISTEN` (default `127.0.0.1:50152` or `off`),
    /// `_TLS_CERT_FILE` / `_TLS_KEY_FILE`, `_ACCESS_LOG`: see `ServerEndpointSettings`.
    public var endpoint = ServerEndpointSettings(defaultPort: ProfileServerDefinition.defaultPort)
    /// `KINDRED_PROFILE_DATABASE_URL`, `_DATABASE_POOL_SIZE`, `_MIGRATIONS_DIR`: see `DatabaseSettings`.
    public var database = DatabaseSettings(server: "profile", schema: "profile")
    /// `KINDRED_PROFILE_AUTH_ADDRESS`, `_SERVICE_SECRET`, `_REVOCATION_STALE_MS`: how profile reaches auth
    /// (`AuthClientSettings`).
    public var auth = AuthClientSettings()
    /// `KINDRED_PROFILE_DISCOVERY_ADDRESS` (host:port, or replicas: a comma-separated list), default `127.0.0.1:50053`: discovery's CheckCandidates
    /// (card mode), asked by GetProfiles for the cards of members not matched with the viewer (a card is shown
    /// only to a viewer whose deck could show the member, or whom the member liked).
    public var discoveryAddress = ServiceAddress(host: "127.0.0.1", port: 50053)
    /// `KINDRED_PROFILE_DISCOVERY_SHARDS` (host:port,… one per discovery shard, in shard order): when discovery runs
    /// as geographic shards, the candidate checks go to the shard owning the viewer's cell; unset: the one address.
    public var discoveryShardAddresses: [ServiceAddress]? = nil
    /// `KINDRED_PROFILE_DISCOVERY_TIMEOUT_MS` (int, 50..10000), default 1000: the deadline of that check. Without
    /// an answer GetProfiles answers UNAVAILABLE (retry), never an unchecked card.
    public var discoveryTimeout: Duration = .seconds(1)
    /// `KINDRED_PROFILE_EVENT_CONSUMERS`, `_EVENT_POLL_MS`: where profile's events go (`EventRelaySettings`).
    public var events = EventRelaySettings()
    /// `KINDRED_PROFILE_PROPAGATION_MS` (int, 100..30000), default 3000: how long CreateProfile, UpdateProfile,
    /// UpdateLocation, UploadPhoto and DeletePhoto wait for discovery and match to apply the change (so the member's
    /// next deck call or swipe sees it) before answering UNAVAILABLE (retry).
    public var propagationTimeout: Duration = .seconds(3)
    /// `KINDRED_PROFILE_PHOTO_DIR` (path), default none: keep photo bytes in this content-addressed folder instead
    /// of PostgreSQL (table photo_blobs).
    public var photoDirectory: String?
    /// `KINDRED_PROFILE_PHOTO_WORKERS` (int, 1..64), default the number of cores: photos decoded and encoded at
    /// once (the pipeline runs on its own threads, never on the event loops); further uploads wait their turn.
    public var photoWorkers = ProcessInfo.processInfo.activeProcessorCount
    /// `KINDRED_PROFILE_LOCATION_INTERVAL_MS` (int, 1000..3600000), default 60000: least time between two accepted
    /// UpdateLocation calls of a user.
    public var locationInterval: Duration = .seconds(60)
    /// `KINDRED_PROFILE_UPLOADS_PER_HOUR` (int, 1..10000), default 60: photo uploads per user per hour.
    public var uploadsPerHour = 60

    /// `KINDRED_MEDIA_URL_KEY` (string, 32..256; the same value the gateway has), default none: the HMAC key of
    /// the signed photo URLs. Unset: photos carry no URLs (apps use GetPhoto).
    public var mediaURLKey: String?
    /// `KINDRED_PROFILE_MEDIA_BASE_URL` (URL without trailing slash, at most 256 bytes), default
    /// `http://127.0.0.1:50250` (the gateway's media port in the local cluster): what photo URLs start with; a CDN's
    /// address in production.
    public var mediaBaseURL = "http://127.0.0.1:50250"
    /// `KINDRED_PROFILE_MEDIA_URL_LIFETIME_SECONDS` (int, 60..86400), default 900: how long a signed photo URL is
    /// valid at least. Expiries are rounded up to a third of it, so a URL stays the same for that long (CDN hits)
    /// and is valid at most 4/3 of it. A URL cannot be revoked: this bounds how long one outlives a block.
    public var mediaURLLifetimeSeconds: Int64 = 900
    /// `KINDRED_PROFILE_UPLOAD_URL_LIFETIME_SECONDS` (int, 60..86400), default 600: how long a CreateUploadUrl URL
    /// takes a PUT (and a retried PUT answers the stored photo).
    public var uploadURLLifetimeSeconds: Int64 = 600
    /// `KINDRED_LOCATION_KEY` (string, 32..256), required, the same value discovery has: where members are
    /// published, which card distances are measured between (`PublishedLocation`). Plain cell centres only for
    /// code that builds the configuration itself (tests).
    public var location = PublishedLocation(offset: nil)

    public init() {}

    public init(_ reader: EnvironmentReader) throws {
        self.endpoint = try ProfileServerDefinition.endpoint(reader)
        self.database = try ProfileServerDefinition.database(reader) ?? self.database
        self.auth = try AuthClientSettings(server: "profile", environment: reader)
        self.events = try EventRelaySettings(server: "profile", environment: reader)
        self.discoveryAddress = try reader.serviceAddress("KINDRED_PROFILE_DISCOVERY_ADDRESS", default: self.discoveryAddress)
        self.discoveryShardAddresses = try DiscoveryShardRouter.addresses(reader, "KINDRED_PROFILE_DISCOVERY_SHARDS")
        self.discoveryTimeout = try reader.milliseconds(
            "KINDRED_PROFILE_DISCOVERY_TIMEOUT_MS", default: self.discoveryTimeout, in: 50...10_000)
        self.propagationTimeout = try reader.milliseconds(
            "KINDRED_PROFILE_PROPAGATION_MS", default: self.propagationTimeout, in: 100...30_000)
        self.photoDirectory = reader.string("KINDRED_PROFILE_PHOTO_DIR")
        self.photoWorkers = try reader.int("KINDRED_PROFILE_PHOTO_WORKERS", default: self.photoWorkers, in: 1...64)
        self.locationInterval = try reader.milliseconds(
            "KINDRED_PROFILE_LOCATION_INTERVAL_MS", default: self.locationInterval, in: 1000...3_600_000)
        self.mediaURLKey = try reader.secret("KINDRED_MEDIA_URL_KEY", length: 32...256)
        self.location = try PublishedLocation(reader)
        if let base = reader.string("KINDRED_PROFILE_MEDIA_BASE_URL") {
            guard base.hasPrefix("http://") || base.hasPrefix("https://"), !base.hasSuffix("/"),
                base.utf8.count <= CardPage.maxMediaBaseURLBytes
            else {
                throw ConfigurationError(
                    key: "KINDRED_PROFILE_MEDIA_BASE_URL", problem: "an http(s) URL without a trailing slash, at most 256 bytes")
            }
            self.mediaBaseURL = base
        }
        self.uploadsPerHour = try reader.int("KINDRED_PROFILE_UPLOADS_PER_HOUR", default: self.uploadsPerHour, in: 1...10_000)
        self.mediaURLLifetimeSeconds = try reader.seconds(
            "KINDRED_PROFILE_MEDIA_URL_LIFETIME_SECONDS", default: self.mediaURLLifetimeSeconds, in: 60...86_400)
        self.uploadURLLifetimeSeconds = try reader.seconds(
            "KINDRED_PROFILE_UPLOAD_URL_LIFETIME_SECONDS", default: self.uploadURLLifetimeSeconds, in: 60...86_400)
    }
}
