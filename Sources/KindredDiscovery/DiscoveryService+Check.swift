import KindredGRPC
import KindredProto
import KindredServiceKit

extension DiscoveryService {
    /// Services that may ask whether a viewer's deck could show someone: match, before it accepts a swipe;
    /// profile, before it shows a card (`include_likers`).
    static let candidateCheckers: Set<String> = ["match", "profile"]

    /// `CheckCandidates`: which targets the viewer's deck could show (`CommunityIndex.couldShow`, the predicate
    /// the deck's walk uses), reaching as far as the deck widens (or search reaches): the community's maximum
    /// radius. From memory; swipes, passes and blocks play no part (match knows its own). Card mode
    /// (`include_likers`, profile's cards) also lists the targets who liked the viewer (`hasLiked`): the viewer's
    /// likes received shows them, whatever the preferences.
    func checkCandidates(_ request: DiscoveryApi.CheckCandidatesRequest, _ context: ServerContext) async throws
        -> DiscoveryApi.CheckCandidatesResponse
    {
        try await self.access.requireService(Self.candidateCheckers, context)
        let viewer = try Self.userKey(request.viewerUserId, field: "viewer_user_id")
        guard (1...100).contains(request.targetUserIds.count) else {
            throw DiscoveryError.invalid("target_user_ids", "OUT_OF_RANGE", "1..100 user ids")
        }
        var targets: [UserKey] = []
        for (index, id) in request.targetUserIds.enumerated() {
            let target = try Self.userKey(id, field: "target_user_ids[\(index)]")
            if !targets.contains(target) { targets.append(target) }
        }
        guard self.isReady else {
            throw DiscoveryError(.unavailable, "The index is being built; retry shortly", retryAfter: .seconds(1))
        }
        try self.requireOwnShard(viewer)
        let today = Self.today()
        var response = DiscoveryApi.CheckCandidatesResponse()
        guard let community = self.index.community(of: viewer) else { return response }
        let shown: [UserKey] =
            self.index.read(community) { state in
                guard let own = state.index.radiusKm(of: viewer) else { return [] }
                let reach = state.widestRadius(own: own)
                return targets.filter {
                    state.index.couldShow($0, to: viewer, radiusKm: reach, today: today)
                        || (request.includeLikers && state.index.hasLiked($0, viewer))
                }
            } ?? []
        response.shownUserIds = shown.map(\.uuidString)
        return response
    }
}
