import KindredGRPC
import KindredIdentity
import KindredProto
import Logging

/// Whose card a viewer may see as far as preferences go (DESIGN §5): a member the viewer's deck could show (same
/// community, eligible, mutual preferences, within reach at published positions), or one who liked the viewer.
/// Profile does not evaluate preferences: discovery holds every fact the deck uses in memory and answers
/// `CheckCandidates` (card mode, `include_likers`) with the deck's own predicate.
public protocol CardCheck: Sendable {
    /// The members of `targets` (1..50) `viewer` may see as far as preferences go. Throws ``ProfileError``
    /// UNAVAILABLE when it cannot be known: a card is never shown unchecked.
    func shown(_ targets: [String], to viewer: String) async throws -> Set<String>
}

/// ``CardCheck`` through discovery's `CheckCandidates` with `include_likers`, with profile's service token and a
/// deadline of its own. Any failure is UNAVAILABLE with a retry hint (fail closed).
public struct DiscoveryCardCheck: CardCheck {
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

    static let unavailable: ProfileError = {
        var error = ProfileError(.unavailable, "UNAVAILABLE", "Profiles are unavailable right now; retry shortly")
        error.retryAfter = .seconds(1)
        return error
    }()

    public func shown(_ targets: [String], to viewer: String) async throws -> Set<String> {
        guard let tokens = self.tokens else { throw Self.unavailable }
        var request = Kindred.Discovery.V1.CheckCandidatesRequest()
        request.viewerUserId = viewer
        request.targetUserIds = targets
        request.includeLikers = true
        do {
            let token = try await tokens.token()
            let response = try await self.client.unary(
                Kindred.Discovery.V1.DiscoveryService.Method.checkCandidates, request,
                metadata: ["authorization": .string("Bearer " + token)], options: CallOptions(timeout: self.timeout))
            return Set(response.shownUserIds)
        } catch {
            self.logger.warning("discovery's card check failed", metadata: ["error": "\(error)"])
            throw Self.unavailable
        }
    }
}
