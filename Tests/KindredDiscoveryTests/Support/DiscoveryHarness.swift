import Foundation
import KindredDiscovery
import KindredGRPC
import KindredGRPCServices
import KindredGeo
import KindredIdentity
import KindredOpenSSL
import KindredPostgres
import KindredProto
import KindredProtobuf
import KindredServiceKit
import KindredServiceTesting
import Logging
import Testing

typealias DiscoveryApi = Kindred.Discovery.V1
typealias CommonApi = Kindred.Common.V1
typealias D = Kindred.Discovery.V1.DiscoveryService.Method

/// Token signing for tests: the discovery server trusts this key (as it trusts auth's keys in production).
let testKeys = TestTokens(keyID: "discovery-test")

/// The published positions' key of every test server (`LocationOffset`).
let testLocationKey = "discovery-test-location-key-0123456789abcdef"

/// The discovery server as TestServer builds it, with callers checked against `testKeys` instead of auth's keys
/// (the rest is the real server: configuration from settings, database, index, inbox).
enum TestDiscoveryDefinition: ServerDefinition {
    static let name = "discovery"
    static let summary = "discovery (tests)"
    static let defaultPort = 50053
    static let schema: String? = "discovery"

    static func makeServer(settings: EnvironmentReader, logger: Logger) async throws -> DiscoveryServer {
        var configuration = try DiscoveryConfiguration(settings)
        // The privacy attack shows it succeeds without the published positions' offset (tests only).
        if settings.string("KINDRED_TEST_PLAIN_CELLS") == "1" { configuration.locationOffset = nil }
        return try DiscoveryServer(
            configuration: configuration,
            auth: AuthConnection(fixedKeys: testKeys.trustedKeys, logger: logger),
            logger: logger)
    }
}

/// A member as the tests describe them; `snapshot` is what profile would publish.
struct Member {
    var id: String = try! UUIDv7.generate()
    var community = "dating"
    var latitude = 52.52
    var longitude = 13.405
    var gender: CommonApi.Gender = .woman
    var interestedIn: [CommonApi.Gender] = [.man]
    var birthYear: Int32 = 1995
    var ageMin: Int32 = 18
    var ageMax: Int32 = 60
    var radiusKm: Int32 = 50
    var hideDistance = false
    var eligible = true
    var attributes: [CommonApi.AttributeValue] = []
    var version: Int64 = 1

    var token: String { testKeys.userToken(self.id, community: self.community) }
    /// Where the test server publishes the member (their cell moved by their offset under `testLocationKey`).
    var published: (latitude: Double, longitude: Double) {
        let cell = Geohash.decode(self.snapshot.geohashCell)!
        return LocationOffset(key: Array(testLocationKey.utf8)).published(user: self.key, latitude: cell.latitude, longitude: cell.longitude)
    }
    var key: UserKey { UserKey(uuidString: self.id)! }

    var snapshot: CommonApi.CandidateSnapshot {
        var snapshot = CommonApi.CandidateSnapshot()
        snapshot.userId = self.id
        snapshot.communityId = self.community
        snapshot.eligible = self.eligible
        snapshot.birthDate = .with {
            $0.year = self.birthYear
            $0.month = 6
            $0.day = 15
        }
        snapshot.gender = self.gender
        snapshot.interestedIn = self.interestedIn
        snapshot.ageMinYears = self.ageMin
        snapshot.ageMaxYears = self.ageMax
        snapshot.maxDistanceKm = self.radiusKm
        snapshot.geohashCell = Geohash.encode(latitude: self.latitude, longitude: self.longitude, precision: 6)!
        snapshot.attributes = self.attributes
        snapshot.hideDistance = self.hideDistance
        snapshot.version = self.version
        snapshot.updatedUnixMs = Int64(Date().timeIntervalSince1970 * 1000)
        return snapshot
    }

    /// A point `km` east of this member's position (the same latitude).
    func east(_ km: Double) -> (Double, Double) {
        (self.latitude, self.longitude + km / (111.32 * cos(self.latitude * .pi / 180)))
    }
}

/// One discovery server on a fresh database, a client, and helpers that feed it the way profile, auth and
/// match do (DeliverEvents with their service tokens).
struct DiscoveryHarness {
    let server: TestServer<TestDiscoveryDefinition>
    let client: GRPCClient
    var database: PostgresClient { self.server.server.database }
    static let admin = testKeys.userToken(try! UUIDv7.generate(), community: "dating", roles: ["user", "admin"])

    static func with<T>(settings: [String: String] = [:], _ body: (DiscoveryHarness) async throws -> T) async throws -> T {
        var logger = Logger(label: "kindred.discovery.test")
        logger.logLevel = .error
        var settings = settings
        if settings["KINDRED_LOCATION_KEY"] == nil { settings["KINDRED_LOCATION_KEY"] = testLocationKey }
        let server = try await TestServer<TestDiscoveryDefinition>.start(settings: settings, logger: logger)
        let client = server.makeClient(logger: logger)
        let harness = DiscoveryHarness(server: server, client: client)
        // The index is built from PostgreSQL at start; decks answer UNAVAILABLE until then.
        while !server.server.service.isReady { try await Task.sleep(for: .milliseconds(10)) }
        let result: Result<T, any Error>
        do { result = .success(try await body(harness)) } catch { result = .failure(error) }
        await client.close()
        await server.stop()
        return try result.get()
    }

    func call<Request, Response>(_ method: ProtoMethod<Request, Response>, _ request: Request, token: String)
        async throws -> Response
    {
        try await self.client.call(method, request, token: token)
    }

    /// The status code of a call that must fail.
    func failure<Request, Response>(_ method: ProtoMethod<Request, Response>, _ request: Request, token: String)
        async -> StatusCode?
    {
        await self.client.failureCode(method, request, token: token)
    }

    /// Delivers events as `producer` would (service token, the inbox); returns the acknowledged ids.
    @discardableResult
    func deliver(_ events: [CommonApi.Event], from producer: String) async throws -> [String] {
        try await self.client.deliver(D.deliverEvents, events, from: producer, tokens: testKeys)
    }

    /// Profile publishes a community.
    func community(
        _ id: String = "dating", maxRadiusKm: Int32 = 160, attributes: [CommonApi.AttributeDefinition] = [],
        version: Int64 = 1
    ) async throws {
        var event = CommonApi.Event()
        event.communityId = id
        event.payload = .communityUpdated(
            .with {
                $0.community = .with {
                    $0.communityId = id
                    $0.version = version
                    $0.settings = .with {
                        $0.defaultRadiusKm = 50
                        $0.maxRadiusKm = maxRadiusKm
                        $0.genderMatching = true
                        $0.attributeDefinitions = attributes
                    }
                }
            })
        try await self.deliver([event], from: "profile")
    }

    /// Profile publishes members' snapshots.
    func publish(_ members: [Member]) async throws {
        let events = members.map { member in
            var event = CommonApi.Event()
            event.userId = member.id
            event.communityId = member.community
            event.payload = .profileUpdated(.with { $0.snapshot = member.snapshot })
            return event
        }
        for start in stride(from: 0, to: events.count, by: 100) {
            try await self.deliver(Array(events[start..<min(events.count, start + 100)]), from: "profile")
        }
    }

    /// Match's events about `user`.
    func matchEvent(_ user: Member, _ payload: CommonApi.Event.Payload) async throws {
        var event = CommonApi.Event()
        event.userId = user.id
        event.communityId = user.community
        event.payload = payload
        try await self.deliver([event], from: "match")
    }

    @discardableResult
    func swipe(_ viewer: Member, _ target: Member, like: Bool) async throws -> String {
        let id = try UUIDv7.generate()
        try await self.matchEvent(
            viewer,
            .swipeRecorded(
                .with {
                    $0.swipeId = id
                    $0.targetUserId = target.id
                    $0.action = like ? .like : .pass
                    $0.swipedUnixMs = Int64(Date().timeIntervalSince1970 * 1000)
                }))
        return id
    }

    func accountEvent(_ user: Member, _ payload: CommonApi.Event.Payload) async throws {
        var event = CommonApi.Event()
        event.userId = user.id
        event.communityId = user.community
        event.payload = payload
        try await self.deliver([event], from: "auth")
    }

    /// The viewer's whole deck (all pages), in order.
    func deck(_ viewer: Member, pageSize: Int32 = 50) async throws -> [DiscoveryApi.Candidate] {
        var all: [DiscoveryApi.Candidate] = []
        var request = DiscoveryApi.GetDeckRequest()
        request.pageSize = pageSize
        repeat {
            let page = try await self.call(D.getDeck, request, token: viewer.token)
            all += page.candidates
            request.pageToken = page.nextPageToken
        } while !request.pageToken.isEmpty
        return all
    }

    func deckIDs(_ viewer: Member) async throws -> Set<String> { Set(try await self.deck(viewer).map(\.userId)) }

    func search(_ viewer: Member, _ configure: (inout DiscoveryApi.SearchMembersRequest) -> Void = { _ in }) async throws
        -> [DiscoveryApi.Candidate]
    {
        var request = DiscoveryApi.SearchMembersRequest()
        configure(&request)
        var all: [DiscoveryApi.Candidate] = []
        repeat {
            let page = try await self.call(D.searchMembers, request, token: viewer.token)
            all += page.results
            request.pageToken = page.nextPageToken
        } while !request.pageToken.isEmpty
        return all
    }

    func footprint(_ user: Member) async throws -> [String: Int64] {
        var request = Kindred.Common.V1.GetUserFootprintRequest()
        request.userId = user.id
        let response = try await self.call(D.getUserFootprint, request, token: Self.admin)
        return Dictionary(uniqueKeysWithValues: response.counts.map { ($0.kind, $0.rows) })
    }
}
