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

typealias MatchApi = Kindred.Match.V1
typealias CommonApi = Kindred.Common.V1

/// `kindred.match.v1.MatchService`: swipes, matches and follows, blocks, reports, and the batch reads discovery
/// needs. Callers are checked here with auth's keys and session ends (`AuthConnection`), not only by the
/// gateway. Handlers read as domain logic: the SQL is in the stores (`SwipeStore`, `MatchStore`, `SafetyStore`,
/// `DirectoryStore`), the rules in value types (`PairState`, `UndoPolicy`, `LikeBudget`).
public final class MatchService: GRPCService, Sendable {
    let configuration: MatchConfiguration
    let database: PostgresClient
    let auth: AuthConnection
    /// Who a swiper's deck could show (discovery): asked before every swipe.
    let candidateCheck: any CandidateCheck
    let logger: Logger
    /// Group commit of swipes (several callers' swipes in one transaction).
    public let writer: SwipeWriter
    public let inbox: EventInbox
    let outbox = Outbox(producer: "match")
    let swipeLimiter: TokenBucketLimiter
    let reportLimiter: TokenBucketLimiter
    let pageTokenKey: [UInt8]
    let swipes = SwipeStore()
    let matches = MatchStore()
    let safety = SafetyStore()
    let directory = DirectoryStore()
    let activities = ActivityStore()
    let swipeCounter: Counter
    let matchCounter: Counter
    let matchWait: CoreMetrics.Timer
    let matchWaitTimeouts: Counter
    let candidateCheckTime: CoreMetrics.Timer

    public init(
        configuration: MatchConfiguration,
        database: PostgresClient,
        auth: AuthConnection,
        candidateCheck: any CandidateCheck,
        metricsFactory: any MetricsFactory,
        logger: Logger
    ) {
        self.configuration = configuration
        self.database = database
        self.auth = auth
        self.candidateCheck = candidateCheck
        self.logger = logger
        self.inbox = EventInbox(database: database, logger: logger)
        self.swipeLimiter = TokenBucketLimiter(rate: configuration.swipeRate, burst: configuration.swipeBurst)
        self.reportLimiter = TokenBucketLimiter(
            rate: Double(configuration.reportsPerHour) / 3600, burst: configuration.reportsPerHour)
        self.pageTokenKey = PageToken.key(
            service: "match", secret: configuration.pageTokenSecret ?? configuration.auth.serviceSecret)
        // match_swipes_total: acknowledged swipes (replays included); match_matches_total: matches and
        // connections created. Batch sizes and commit times: match_swipe_batch_size, match_swipe_commit_seconds.
        self.swipeCounter = Counter(label: "match_swipes_total", factory: metricsFactory)
        self.matchCounter = Counter(label: "match_matches_total", factory: metricsFactory)
        // match_match_wait_seconds: how long a matching swipe waited for chat and profile to apply the match;
        // match_match_wait_timeouts_total: such swipes answered UNAVAILABLE because one of them was still behind.
        self.matchWait = CoreMetrics.Timer(label: "match_match_wait_seconds", factory: metricsFactory)
        self.matchWaitTimeouts = Counter(label: "match_match_wait_timeouts_total", factory: metricsFactory)
        // match_swipe_check_seconds: discovery's CheckCandidates round trip, which every swipe waits for.
        self.candidateCheckTime = CoreMetrics.Timer(label: "match_swipe_check_seconds", factory: metricsFactory)
        self.writer = SwipeWriter(
            database: database,
            store: self.swipes,
            outbox: self.outbox,
            maxBatch: configuration.swipeBatch,
            writers: configuration.swipeWriters,
            metricsFactory: metricsFactory,
            logger: logger
        )
    }

    /// Routes call the handlers directly: `MatchError`, `RPCError` and `PostgresError` are mapped once, by the
    /// runtime.
    public func register(in router: inout GRPCRouter) {
        typealias M = MatchApi.MatchService.Method
        router.unary(M.swipe) { try await self.swipe($0, $1) }
        router.unary(M.undo) { try await self.undo($0, $1) }
        router.unary(M.listMatches) { try await self.listMatches($0, $1) }
        router.unary(M.unmatch) { try await self.unmatch($0, $1) }
        router.unary(M.listLikesReceived) { try await self.listLikesReceived($0, $1) }
        router.unary(M.block) { try await self.block($0, $1) }
        router.unary(M.unblock) { try await self.unblock($0, $1) }
        router.unary(M.listBlocks) { try await self.listBlocks($0, $1) }
        router.unary(M.reportUser) { try await self.reportUser($0, $1) }
        router.unary(M.filterUnseen) { try await self.filterUnseen($0, $1) }
        router.unary(M.getRelations) { try await self.getRelations($0, $1) }
        router.unary(M.listReports) { try await self.listReports($0, $1) }
        router.unary(M.getReport) { try await self.getReport($0, $1) }
        router.unary(M.resolveReport) { try await self.resolveReport($0, $1) }
        router.unary(M.startActivity) { try await self.startActivity($0, $1) }
        router.unary(M.stopActivity) { try await self.stopActivity($0, $1) }
        router.unary(M.listFollowedActivities) { try await self.listFollowedActivities($0, $1) }
        router.unary(M.deliverEvents) { try await self.deliverEvents($0, $1) }
        router.unary(M.getUserFootprint) { try await self.getUserFootprint($0, $1) }
    }

    /// Who is calling and what they may do (the kit's one caller check, with auth's keys and session ends).
    var access: ServiceAccess { self.auth.access }

    // MARK: Validation

    /// A user id from a request: canonical lower-case UUIDv7, else INVALID_ARGUMENT naming `field`.
    static func userID(_ text: String, field: String) throws -> String {
        let id = text.lowercased()
        guard UUIDv7.isValid(id) else { throw MatchError.invalid(field, "INVALID_FORMAT", "a user id") }
        return id
    }

    /// Page size 1..100, 0 = 20.
    static func pageSize(_ size: Int32) throws -> Int {
        guard size == 0 || (1...100).contains(size) else {
            throw MatchError.invalid("page_size", "OUT_OF_RANGE", "1..100, or 0 for 20")
        }
        return size == 0 ? 20 : Int(size)
    }

    /// `pageSize` for lists whose items carry profile cards: at most `CardPage.maxCards` (50), so a page stays
    /// under the 4 MiB message limit whatever the members wrote; a larger request gets 50 and a next-page token.
    static func cardPageSize(_ size: Int32) throws -> Int {
        min(try Self.pageSize(size), CardPage.maxCards)
    }

    /// The token of the next page, or "" when this page was the last.
    func nextPageToken(offset: Int, count: Int, pageSize: Int, more: Bool, scope: String) -> String {
        guard more else { return "" }
        return PageToken.encode(offset: offset + pageSize, key: self.pageTokenKey, scope: scope)
    }
}

extension Int64 {
    /// Milliseconds → Duration.
    var millisecondsDuration: Duration { .milliseconds(self) }
}
