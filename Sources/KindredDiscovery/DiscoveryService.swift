import CoreMetrics
import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredOpenSSL
import KindredPostgres
import KindredProto
import KindredServiceKit
import Logging
import NIOConcurrencyHelpers

typealias DiscoveryApi = Kindred.Discovery.V1
typealias CommonApi = Kindred.Common.V1

/// `kindred.discovery.v1.DiscoveryService`: decks, recommendations and member search from the in-memory index
/// (`DiscoveryIndex`), and the projection that feeds it (events, IndexCandidate, RebuildIndex). Callers are
/// checked here with auth's keys and session ends (`AuthConnection`). Handlers read as domain logic: the SQL is
/// in `ProjectionStore`, the index and the ranking are value types in `Index/` and `Ranking/`.
public final class DiscoveryService: GRPCService, Sendable {
    let configuration: DiscoveryConfiguration
    let database: PostgresClient
    let auth: AuthConnection
    let profile: GRPCClient
    let logger: Logger
    public let index: DiscoveryIndex
    public let inbox: EventInbox
    let store = ProjectionStore()
    /// Writers one at a time (events, index calls, rebuilds): memory follows PostgreSQL's commit order.
    let gate = SerialGate()
    let pages: DeckPages
    let rebuilding = NIOLockedValueBox(false)
    /// Whether the index was built from PostgreSQL since the start (decks answer UNAVAILABLE until then).
    let built = NIOLockedValueBox(false)
    public var isReady: Bool { self.built.withLockedValue { $0 } }
    let pageTokenKey: [UInt8]
    let viewerLimiter: TokenBucketLimiter
    let deckCounter: Counter
    let widenedCounter: Counter
    let eventCounter: Counter
    let deckTimer: CoreMetrics.Timer

    public init(
        configuration: DiscoveryConfiguration,
        database: PostgresClient,
        auth: AuthConnection,
        profile: GRPCClient,
        metricsFactory: any MetricsFactory,
        logger: Logger
    ) {
        self.configuration = configuration
        self.database = database
        self.auth = auth
        self.profile = profile
        self.logger = logger
        self.index = DiscoveryIndex(shards: configuration.shards)
        self.inbox = EventInbox(database: database, logger: logger)
        self.pages = DeckPages(capacity: configuration.heldDecks, byteBudget: configuration.heldDeckMiB << 20)
        self.viewerLimiter = TokenBucketLimiter(rate: configuration.viewerRate, burst: configuration.viewerBurst)
        self.pageTokenKey = PageToken.key(service: "discovery", secret: configuration.auth.serviceSecret)
        // discovery_decks_total / discovery_decks_widened_total: first deck pages served and how many of them
        // were widened; discovery_events_applied_total: events whose effect reached the index;
        // discovery_deck_seconds: time to find and rank a first page.
        self.deckCounter = Counter(label: "discovery_decks_total", factory: metricsFactory)
        self.widenedCounter = Counter(label: "discovery_decks_widened_total", factory: metricsFactory)
        self.eventCounter = Counter(label: "discovery_events_applied_total", factory: metricsFactory)
        self.deckTimer = CoreMetrics.Timer(label: "discovery_deck_seconds", factory: metricsFactory)
    }

    /// Routes call the handlers directly: `DiscoveryError`, `RPCError` and `PostgresError` are mapped once, by
    /// the runtime.
    public func register(in router: inout GRPCRouter) {
        typealias M = DiscoveryApi.DiscoveryService.Method
        router.unary(M.getDeck) { try await self.getDeck($0, $1) }
        router.unary(M.getRecommendations) { try await self.getRecommendations($0, $1) }
        router.unary(M.searchMembers) { try await self.searchMembers($0, $1) }
        router.unary(M.checkCandidates) { try await self.checkCandidates($0, $1) }
        router.unary(M.indexCandidate) { try await self.indexCandidate($0, $1) }
        router.unary(M.removeCandidate) { try await self.removeCandidate($0, $1) }
        router.unary(M.rebuildIndex) { try await self.rebuildIndex($0, $1) }
        router.unary(M.deliverEvents) { try await self.deliverEvents($0, $1) }
        router.unary(M.getUserFootprint) { try await self.getUserFootprint($0, $1) }
    }

    // MARK: Callers

    /// Services that may ask for a named viewer's deck, recommendations or search.
    static let deckReaders: Set<String> = ["gateway"]

    /// Who is calling and what they may do (the kit's one caller check, with auth's keys and session ends).
    var access: ServiceAccess { self.auth.access }

    /// The viewer of a deck, recommendations or search call: a user acts as themself (`viewer_user_id` empty or
    /// their own id, else PERMISSION_DENIED), a service names the viewer; each viewer has a call budget
    /// (RESOURCE_EXHAUSTED beyond it). Returns the viewer and, for a user, the community of their token.
    func viewer(_ requested: String, _ context: ServerContext) async throws -> (UserKey, String?) {
        let caller = try await self.access.requireViewer(requested, context, services: Self.deckReaders)
        let viewer = try Self.userKey(caller.id, field: "viewer_user_id")
        try self.requireOwnShard(viewer)
        if let wait = self.viewerLimiter.acquire(viewer.uuidString) {
            throw DiscoveryError(.rateLimited, "Too many requests; slow down", retryAfter: wait)
        }
        guard self.isReady else {
            throw DiscoveryError(.unavailable, "The index is being built; retry shortly", retryAfter: .seconds(1))
        }
        return (viewer, caller.community)
    }

    /// With several shards, a viewer whose published position lies in another shard's cell is sent there
    /// (`ShardRedirect`: FAILED_PRECONDITION `WRONG_SHARD` naming the owner); a viewer not indexed here is answered
    /// here, as every shard would answer them.
    func requireOwnShard(_ viewer: UserKey) throws {
        let shards = self.index.shards
        guard shards.isSharded, let position = self.index.position(of: viewer) else { return }
        let owner = shards.owner(latitude: position.latitude, longitude: position.longitude)
        if owner != shards.index { throw ShardRedirect(shard: owner) }
    }

    // MARK: Validation

    /// A user id from a request, else INVALID_ARGUMENT naming `field`.
    static func userKey(_ text: String, field: String) throws -> UserKey {
        let id = text.lowercased()
        guard UUIDv7.isValid(id), let key = UserKey(uuidString: id) else {
            throw DiscoveryError.invalid(field, "INVALID_FORMAT", "a user id")
        }
        return key
    }

    /// Page size 1..50, 0 = `default`.
    static func pageSize(_ size: Int32, field: String = "page_size", default value: Int = 20, max: Int = 50) throws -> Int {
        guard size == 0 || (1...Int32(max)).contains(size) else {
            throw DiscoveryError.invalid(field, "OUT_OF_RANGE", "1..\(max), or 0 for \(value)")
        }
        return size == 0 ? value : Int(size)
    }

    /// Today (UTC) as yyyymmdd, for ages: the proleptic Gregorian date of the day number (H. Hinnant's
    /// civil_from_days), computed per deck — a `Calendar` and `TimeZone` per call cost more than the deck's walk.
    public static func today(_ date: Date = Date()) -> Int32 {
        let days = Int((date.timeIntervalSince1970 / 86_400).rounded(.down)) + 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let dayOfEra = days - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return Int32(year * 10000 + month * 100 + day)
    }

    static var nowUnixMs: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}
