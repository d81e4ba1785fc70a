import KindredGRPC
import KindredGRPCServices
import KindredIdentity
import KindredProto
import Logging
import Synchronization

/// The other member's display name for a notification, from profile's cards (`GetProfiles` with the recipient as
/// viewer, so only a card the recipient may see names anyone), kept a minute. Only `display_name` is taken from
/// the card: never an email address (profile has none), a location, a city or a birth date.
final class MemberNames: Sendable {
    let client: GRPCClient
    let tokens: ServiceTokenSource
    let timeout: Duration
    let logger: Logger
    /// How long a name (or its absence) is kept.
    static let lifetime: Duration = .seconds(60)
    /// Most (viewer, member) pairs kept; past it the cache starts over.
    static let capacity = 10_000
    private let cache = Mutex<[String: (name: String?, until: ContinuousClock.Instant)]>([:])

    init(address: ServiceAddress, tokens: ServiceTokenSource, timeout: Duration = .seconds(2), logger: Logger) {
        var configuration = GRPCClientConfiguration(address: address)
        configuration.defaultTimeout = timeout
        configuration.connectTimeout = timeout
        self.client = GRPCClient(configuration: configuration, logger: logger)
        self.tokens = tokens
        self.timeout = timeout
        self.logger = logger
    }

    /// `member`'s display name as `viewer` sees it; nil when profile does not show them to the viewer or cannot
    /// answer (then the templates' neutral word).
    func name(of member: String, for viewer: String) async -> String? {
        let key = viewer + "|" + member
        let now = ContinuousClock.now
        if let cached = self.cache.withLock({ $0[key] }), cached.until > now { return cached.name }
        var request = Kindred.Profile.V1.GetProfilesRequest()
        request.viewerUserId = viewer
        request.userIds = [member]
        do {
            let token = try await self.tokens.token()
            let response = try await self.client.unary(
                Kindred.Profile.V1.ProfileService.Method.getProfiles, request,
                metadata: ["authorization": .string("Bearer " + token)], options: CallOptions(timeout: self.timeout))
            let name = response.profiles.first { $0.userId == member }.map(\.displayName)
            self.cache.withLock { cache in
                if cache.count >= Self.capacity { cache.removeAll() }
                cache[key] = (name, now + Self.lifetime)
            }
            return name
        } catch {
            self.logger.warning("notify sender: profile's card failed", metadata: ["error": "\(error)"])
            return nil
        }
    }

    func close() async { await self.client.close() }
}
