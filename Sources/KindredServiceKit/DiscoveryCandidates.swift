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
    /// The connections to discovery, one per shard (closed by the owning server at shutdown, ``close()``); a
    /// check goes to the shard that owns the viewer's cell.
    public let shards: DiscoveryShardRouter
    let tokens: ServiceTokenSource?
    let timeout: Duration
    let logger: Logger

    /// `addresses`: discovery's shards in shard order (one address: one replica owns everything). `timeout` is
    /// both the connect timeout and each call's deadline.
    public init(addresses: [ServiceAddress], tokens: ServiceTokenSource?, timeout: Duration, logger: Logger) {
        self.shards = DiscoveryShardRouter(
            clients: addresses.map { address in
                var configuration = GRPCClientConfiguration(address: address)
                configuration.defaultTimeout = timeout
                configuration.connectTimeout = timeout
                return GRPCClient(configuration: configuration, logger: logger)
            })
        self.tokens = tokens
        self.timeout = timeout
        self.logger = logger
    }

    public init(address: ServiceAddress, tokens: ServiceTokenSource?, timeout: Duration, logger: Logger) {
        self.init(addresses: [address], tokens: tokens, timeout: timeout, logger: logger)
    }

    /// Closes every shard's connection.
    public func close() async {
        for client in self.shards.clients { await client.close() }
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
            let response = try await self.shards.unary(
                Kindred.Discovery.V1.DiscoveryService.Method.checkCandidates, request, viewer: viewer,
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
