import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredProto
import Logging

/// Discovery's `CheckCandidates` as the services that must not show or accept a member the viewer's deck could
/// not show call it (match before a swipe, profile before a card): discovery holds every fact the deck uses in
/// memory and answers with the deck's own predicate, so no other service keeps a copy of the preference rules.
/// The calls carry the service's token and a deadline of their own.
public struct DiscoveryCandidates: Sendable {
    /// The connection to discovery (closed by the owning server at shutdown).
    public let client: GRPCClient
    let tokens: ServiceTokenSource?
    let timeout: Duration
    let logger: Logger

    /// `timeout` is both the connect timeout and each call's deadline.
    public init(address: ServiceAddress, tokens: ServiceTokenSource?, timeout: Duration, logger: Logger) {
        var configuration = GRPCClientConfiguration(address: address)
        configuration.defaultTimeout = timeout
        configuration.connectTimeout = timeout
        self.client = GRPCClient(configuration: configuration, logger: logger)
        self.tokens = tokens
        self.timeout = timeout
        self.logger = logger
    }

    /// The members of `targets` the `viewer`'s deck could show, and with `includingLikers` also those who liked the
    /// viewer (card mode). nil when it cannot be known (no service token, discovery unreachable, failing or still
    /// building its index): the caller fails closed.
    public func shown(_ targets: [String], to viewer: String, includingLikers: Bool) async -> Set<String>? {
        guard let tokens = self.tokens else { return nil }
        var request = Kindred.Discovery.V1.CheckCandidatesRequest()
        request.viewerUserId = viewer
        request.targetUserIds = targets
        request.includeLikers = includingLikers
        do {
            let token = try await tokens.token()
            let response = try await self.client.unary(
                Kindred.Discovery.V1.DiscoveryService.Method.checkCandidates, request,
                metadata: ["authorization": .string("Bearer " + token)], options: CallOptions(timeout: self.timeout))
            return Set(response.shownUserIds)
        } catch {
            self.logger.warning(
                "discovery's candidate check failed",
                metadata: ["error": "\(error)", "check.cards": "\(includingLikers)"])
            return nil
        }
    }
}
