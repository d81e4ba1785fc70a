import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredMatch
import KindredOpenSSL
import KindredPostgres
import KindredProto
import KindredProtobuf
import KindredServiceKit
import KindredServiceTesting
import Logging
import Testing

typealias MatchApi = Kindred.Match.V1
typealias CommonApi = Kindred.Common.V1
typealias M = Kindred.Match.V1.MatchService.Method

/// Token signing for tests: the match server trusts this key (as it trusts auth's keys in production).
let testKeys = TestTokens(keyID: "match-test")

/// The match server as TestServer builds it, with callers checked against `testKeys` instead of auth's keys
/// (the rest is the real server: configuration from settings, database, writer, relay). Without
/// `KINDRED_MATCH_DISCOVERY_ADDRESS` in the settings, every eligible member counts as one the swiper's deck could
/// show (`EveryoneShown`: these tests are about match's own rules; the cluster tests ask the real discovery).
enum TestMatchDefinition: ServerDefinition {
    static let name = "match"
    static let summary = "match (tests)"
    static let defaultPort = 50054
    static let schema: String? = "match"

    static func makeServer(settings: EnvironmentReader, logger: Logger) async throws -> MatchServer {
        let tokens = ServiceTokenSource { (testKeys.serviceToken("match"), (Int64(Date().timeIntervalSince1970) + 900) * 1000) }
        return try MatchServer(
            configuration: MatchConfiguration(settings),
            auth: AuthConnection(fixedKeys: testKeys.trustedKeys, serviceTokens: tokens, logger: logger),
            candidateCheck: settings.string("KINDRED_MATCH_DISCOVERY_ADDRESS") == nil ? EveryoneShown() : nil,
            logger: logger)
    }
}

/// A swiper's deck could show anyone (match's own rules still apply: community, eligibility, blocks).
struct EveryoneShown: CandidateCheck {
    func shown(_ targets: [String], to viewer: String) async throws -> Set<String> { Set(targets) }
}

/// A member of a test community.
struct Member {
    let id: String
    let community: String
    var token: String { testKeys.userToken(self.id, community: self.community) }
}

/// One match server on a fresh database, a client, and helpers that feed the projections the way profile and
/// auth do (DeliverEvents with their service tokens).
struct MatchHarness {
    let server: TestServer<TestMatchDefinition>
    let client: GRPCClient
    var database: PostgresClient { self.server.server.database }

    static func with<T>(
        settings: [String: String] = [:],
        _ body: (MatchHarness) async throws -> T
    ) async throws -> T {
        var logger = Logger(label: "kindred.match.test")
        logger.logLevel = .error
        let server = try await TestServer<TestMatchDefinition>.start(
            settings: ["KINDRED_MATCH_SWIPE_RATE": "100000", "KINDRED_MATCH_SWIPE_BURST": "100000"].merging(settings) { $1 },
            logger: logger)
        let client = server.makeClient(logger: logger)
        let harness = MatchHarness(server: server, client: client)
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
    func code<Request, Response>(_ method: ProtoMethod<Request, Response>, _ request: Request, token: String)
        async -> StatusCode?
    {
        await self.client.failureCode(method, request, token: token)
    }

    /// Delivers events as `producer` would (service token, the inbox); returns the acknowledged ids.
    @discardableResult
    func deliver(_ events: [CommonApi.Event], from producer: String) async throws -> [String] {
        try await self.client.deliver(M.deliverEvents, events, from: producer, tokens: testKeys)
    }

    /// Profile's CommunityUpdated for a community.
    func community(
        _ id: String, mode: CommonApi.CommunityMode = .mutual, likes: Int32 = 200, undoWindow: Int32 = 300,
        undos: Int32 = 3, version: Int64 = 1
    ) async throws {
        var event = CommonApi.Event()
        event.communityId = id
        event.payload = .communityUpdated(
            .with {
                $0.community = .with {
                    $0.communityId = id
                    $0.version = version
                    $0.settings = .with {
                        $0.mode = mode
                        $0.dailyLikeLimit = likes
                        $0.undoWindowSeconds = undoWindow
                        $0.dailyUndoLimit = undos
                    }
                }
            })
        try await self.deliver([event], from: "profile")
    }

    /// Profile's ProfileUpdated for new members (eligible by default).
    func members(_ count: Int, community: String, eligible: Bool = true) async throws -> [Member] {
        let members = try (0..<count).map { _ in Member(id: try UUIDv7.generate(), community: community) }
        for chunk in stride(from: 0, to: members.count, by: 100) {
            try await self.deliver(
                members[chunk..<min(chunk + 100, members.count)].map { self.profileEvent($0, eligible: eligible, version: 1) },
                from: "profile")
        }
        return members
    }

    func profileEvent(_ member: Member, eligible: Bool, version: Int64) -> CommonApi.Event {
        var event = CommonApi.Event()
        event.userId = member.id
        event.communityId = member.community
        event.payload = .profileUpdated(
            .with {
                $0.snapshot = .with {
                    $0.userId = member.id
                    $0.communityId = member.community
                    $0.eligible = eligible
                    $0.version = version
                }
            })
        return event
    }

    @discardableResult
    func swipe(_ from: Member, _ to: Member, _ action: CommonApi.SwipeAction) async throws -> MatchApi.SwipeResponse {
        try await self.call(
            M.swipe, .with {
                $0.targetUserId = to.id
                $0.action = action
            }, token: from.token)
    }

    func matches(_ member: Member) async throws -> [MatchApi.Match] {
        try await self.call(M.listMatches, MatchApi.ListMatchesRequest(), token: member.token).matches
    }

    /// Events of one type in match's outbox.
    func outboxCount(_ type: String) async throws -> Int {
        Int(try await self.database.query("SELECT count(*) FROM events_outbox WHERE event_type = \(type)").scalar(Int64.self))
    }
}
