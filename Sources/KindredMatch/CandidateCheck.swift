import KindredGRPC
import KindredIdentity
import KindredProto
import Logging

/// Which members a swiper's deck could show (DESIGN §5: a swipe is accepted only on such a member): discovery
/// holds every fact the deck uses in memory and answers `CheckCandidates` with the deck's own predicate.
public protocol CandidateCheck: Sendable {
    /// The members of `targets` the `viewer`'s deck could show (same community, eligible, mutual preferences,
    /// within reach). Throws `MatchError` UNAVAILABLE when it cannot be known: a swipe is never accepted unchecked.
    func shown(_ targets: [String], to viewer: String) async throws -> Set<String>
}

/// `CandidateCheck` through discovery's `CheckCandidates`, with match's service token and a deadline of its own
/// (or the swipe's, if earlier). Any failure is UNAVAILABLE with a retry hint (fail closed).
public struct DiscoveryCandidateCheck: CandidateCheck {
    let client: GRPCClient
    let tokens: ServiceTokenSource?
    let timeout: Duration
    let logger: Logger

    public init(client: GRPCClient, tokens: ServiceTokenSource?, timeout: Duration, logger: Logger) {
        self.client = client
        self.tokens = tokens
        self.timeout = timeout
        self.logger = logger
    }

    static let unavailable = MatchError(
        .unavailable,
        "Swiping is unavailable right now; retry shortly",
        retryAfter: .seconds(1)
    )

    public func shown(_ targets: [String], to viewer: String) async throws -> Set<String> {
        guard let tokens = self.tokens else { throw Self.unavailable }
        var request = Kindred.Discovery.V1.CheckCandidatesRequest()
        request.viewerUserId = viewer
        request.targetUserIds = targets
        do {
            let token = try await tokens.token()
            let response = try await self.client.unary(
                Kindred.Discovery.V1.DiscoveryService.Method.checkCandidates,
                request,
                metadata: ["authorization": .string("Bearer " + token)],
                options: CallOptions(timeout: self.timeout)
            )
            return Set(response.shownUserIds)
        } catch {
            self.logger.warning("discovery's candidate check failed", metadata: ["error": "\(error)"])
            throw Self.unavailable
        }
    }
}
