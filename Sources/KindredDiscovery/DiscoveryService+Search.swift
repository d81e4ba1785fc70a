import Foundation
import KindredGRPC
import KindredProto
import KindredServiceKit

extension DiscoveryService {
    /// `SearchMembers`: compatible members by filters, text and distance, nearest first (then by user id).
    /// Whom it shows is the policy's `search` (``VisibilityPolicy``): swiped members and members who passed on the
    /// viewer are included (only the deck hides a pass); blocks either way and ended matches exclude.
    func searchMembers(_ request: DiscoveryApi.SearchMembersRequest, _ context: ServerContext) async throws
        -> DiscoveryApi.SearchMembersResponse
    {
        let (viewer, tokenCommunity) = try await self.viewer(request.viewerUserId, context)
        let size = try Self.pageSize(request.pageSize)
        guard request.query.count <= 100, request.query.utf8.count <= 400 else {
            throw DiscoveryError.invalid("query", "TOO_LONG", "at most 100 characters, 400 bytes")
        }
        let words = Set(MemberBuilder.words(request.query))
        let community = try self.community(of: viewer, token: tokenCommunity)
        // The page token is scoped to the viewer and the whole query: another query cannot reuse it.
        var scope = "search:\(viewer):\(request.query):\(request.maxDistanceKm)"
        for filter in request.attributeFilters { scope += ":" + ((try? filter.serializedBytes()).map { Data($0).base64EncodedString() } ?? "") }
        let offset = try PageToken.offset(of: request.pageToken, key: self.pageTokenKey, scope: scope)
        let scanLimit = self.configuration.scanLimit
        let found: [IndexMatch] = try self.index.read(community) { (state: CommunityState) throws -> [IndexMatch] in
            let filters = try Self.filters(request.attributeFilters, rules: state.rules)
            let maxRadius = state.rules.maxRadiusKm
            guard request.maxDistanceKm >= 0, request.maxDistanceKm <= maxRadius else {
                throw DiscoveryError.invalid("max_distance_km", "OUT_OF_RANGE", "1..the community's max radius, or 0")
            }
            let facts = state.facts
            var accept: (@Sendable (UserKey) -> Bool)? = nil
            if !filters.isEmpty || !words.isEmpty {
                accept = { @Sendable user in
                    guard let member = facts[user] else { return false }
                    return filters.accepts(member) && words.isSubset(of: member.words)
                }
            }
            let query = DeckQuery(
                limit: scanLimit, radiusKm: request.maxDistanceKm == 0 ? nil : Int(request.maxDistanceKm),
                today: Self.today(), scanLimit: scanLimit, accept: accept
            ).following(.search)
            return state.index.candidates(for: viewer, query) ?? []
        } ?? []
        let sorted = found.sorted { ($0.distanceKm, $0.user) < ($1.distanceKm, $1.user) }
        let page = sorted.dropFirst(offset).prefix(size)
        var response = DiscoveryApi.SearchMembersResponse()
        response.results = self.candidates(
            page.map { RankedCandidate(match: $0, score: 0) }, viewer: viewer, community: community, scored: false)
        if offset + size < sorted.count {
            response.nextPageToken = PageToken.encode(offset: offset + size, key: self.pageTokenKey, scope: scope)
        }
        return response
    }
}
