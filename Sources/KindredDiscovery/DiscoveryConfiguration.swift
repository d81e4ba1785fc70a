import Foundation
import KindredGRPCServices
import KindredGeo
import KindredServiceKit

/// Everything the discovery service can be configured with, read from `KINDRED_DISCOVERY_*`
/// (services/discovery/README.md).
public struct DiscoveryConfiguration: Sendable {
    /// `KINDRED_DISCOVERY_LISTEN` (default `127.0.0.1:50053`), `_ADMIN_LISTEN` (default port + 100, or `off`),
    /// `_TLS_CERT_FILE` / `_TLS_KEY_FILE`, `_ACCESS_LOG`: as for every server.
    public var endpoint = ServerEndpointSettings(defaultPort: DiscoveryServerDefinition.defaultPort)
    /// `KINDRED_DISCOVERY_DATABASE_URL`, `_DATABASE_POOL_SIZE` (1..500, default 10), `_MIGRATIONS_DIR`.
    public var database = DatabaseSettings(server: "discovery", schema: "discovery")
    /// `KINDRED_DISCOVERY_AUTH_ADDRESS`, `_SERVICE_SECRET`, `_REVOCATION_STALE_MS`: how discovery reaches auth
    /// (`AuthClientSettings`).
    public var auth = AuthClientSettings()
    /// `KINDRED_EVENTS_NATS_URL`: events come from NATS JetStream instead of `DeliverEvents` (``EventBusSettings``).
    public var eventBus = EventBusSettings()
    /// `KINDRED_DISCOVERY_PROFILE_ADDRESS` (host:port, or replicas: a comma-separated list), default `127.0.0.1:50052`: profile's
    /// ListProfileIndexEntries for `RebuildIndex` with `backfill_from_profile`.
    public var profileAddress = ServiceAddress(host: "127.0.0.1", port: 50052)
    /// `KINDRED_DISCOVERY_DECK_POOL` (int, 50..5000), default 500: candidates ranked for a deck (the nearest
    /// compatible ones; its pages are served from that ranking).
    public var deckPool = 500
    /// `KINDRED_DISCOVERY_SCAN_LIMIT` (int, 1000..1000000), default 20000: members examined at most per deck
    /// (bounds the work in dense areas; nearest cells first).
    public var scanLimit = 20_000
    /// `KINDRED_DISCOVERY_HELD_DECKS` (int, 100..10000000), default 100000: ranked decks held for their pages
    /// (15 minutes each; the oldest go first when full).
    public var heldDecks = 100_000
    /// `KINDRED_DISCOVERY_HELD_DECK_MIB` (int, 1..65536), default 256: the bytes held decks may take (24 bytes per
    /// candidate not served yet, 160 per deck); the oldest go first beyond it.
    public var heldDeckMiB = 256
    /// `KINDRED_DISCOVERY_VIEWER_RATE` (calls/s per viewer, decimal) and `KINDRED_DISCOVERY_VIEWER_BURST` (int),
    /// default 5 and 120: decks, picks and searches per viewer (whoever calls for them); beyond it
    /// RESOURCE_EXHAUSTED. Bounds scripted radius probing and scraping.
    /// `KINDRED_DISCOVERY_REBUILD_PAGE` (int, 1..100000), default 20000: rows a rebuild fetches per page (FETCH from its cursors).
    public var rebuildPage = 20_000
    /// `KINDRED_LOCATION_KEY` (string, 32..256), required: the secret each member's published position is derived
    /// from (`PublishedLocation`, DESIGN §5), the same value profile has. Keep it stable: a new key moves every
    /// member's published cell. nil (no offset, plain cell centres) only for code that builds the configuration
    /// itself (benchmarks, tests).
    public var locationOffset: LocationOffset?
    public var viewerRate = 5.0
    public var viewerBurst = 120
    /// `KINDRED_DISCOVERY_SHARDS` (`<index>/<count>`, count 1..4096), default `0/1`: which geographic shard this
    /// replica serves (`DiscoveryShards`: precision-3 geohash cells hashed to shards); one shard owns everything.
    public var shards = DiscoveryShards.single

    /// The name this replica consumes events under on the event bus: `discovery` for shard 0 and `discovery_<i>`
    /// for shard i, as its schema is named (services/run-cluster.sh). Each shard keeps its own projection, so each
    /// follows every event through its own durable consumers; replicas of one shard share them.
    public var eventConsumer: String {
        let name = DiscoveryServerDefinition.name
        return self.shards.index == 0 ? name : "\(name)_\(self.shards.index)"
    }

    public init() {}

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        try self.init(EnvironmentReader(environment))
    }

    public init(_ reader: EnvironmentReader) throws {
        self.endpoint = try DiscoveryServerDefinition.endpoint(reader)
        self.database = try DiscoveryServerDefinition.database(reader) ?? self.database
        self.auth = try AuthClientSettings(server: "discovery", environment: reader)
        self.eventBus = try EventBusSettings(environment: reader)
        self.profileAddress = try reader.serviceAddress("KINDRED_DISCOVERY_PROFILE_ADDRESS", default: self.profileAddress)
        self.locationOffset = try PublishedLocation(reader).offset
        self.deckPool = try reader.int("KINDRED_DISCOVERY_DECK_POOL", default: self.deckPool, in: 50...5000)
        self.scanLimit = try reader.int("KINDRED_DISCOVERY_SCAN_LIMIT", default: self.scanLimit, in: 1000...1_000_000)
        self.rebuildPage = try reader.int("KINDRED_DISCOVERY_REBUILD_PAGE", default: self.rebuildPage, in: 1...100_000)
        self.viewerRate = try reader.double("KINDRED_DISCOVERY_VIEWER_RATE", default: self.viewerRate, in: 0.01...1_000_000)
        self.viewerBurst = try reader.int("KINDRED_DISCOVERY_VIEWER_BURST", default: self.viewerBurst, in: 1...1_000_000)
        self.heldDecks = try reader.int("KINDRED_DISCOVERY_HELD_DECKS", default: self.heldDecks, in: 100...10_000_000)
        self.shards = try reader.value(
            "KINDRED_DISCOVERY_SHARDS", default: self.shards, problem: "<index>/<count>, count 1..4096", DiscoveryShards.init)
        self.heldDeckMiB = try reader.int("KINDRED_DISCOVERY_HELD_DECK_MIB", default: self.heldDeckMiB, in: 1...65_536)
    }
}
