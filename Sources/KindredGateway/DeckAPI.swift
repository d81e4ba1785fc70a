import KindredGRPC
import KindredProto

/// `kindred.api.v1.DeckService`: decks, top picks and member search (discovery's ranked ids and coarse
/// distances, then profile's cards for them under the same deadline) and swiping (the match service).
struct DeckAPI: GRPCService {
    let gateway: Gateway

    func register(in router: inout GRPCRouter) {
        typealias D = Api.DeckService.Method
        let gateway = self.gateway
        router.unary(D.swipe) { request, context in
            let caller = try await gateway.admit(context, .user)
            let match = try gateway.requireMatch()
            var forwarded = MatchApi.SwipeRequest()
            forwarded.targetUserId = request.targetUserId
            forwarded.action = request.action
            forwarded.surface = request.surface
            let response = try await match.call(MatchApi.MatchService.Method.swipe, forwarded, as: caller)
            var answer = Api.SwipeResponse()
            answer.swipeId = response.swipeId
            answer.outcome = Api.SwipeOutcome(converting: response.outcome)
            // The card of a new match comes from the list (ListMatches); the swipe answers fast without it.
            answer.match = response.match.map { Api.MatchSummary($0, profile: nil) }
            answer.replayed = response.replayed
            answer.remainingLikes = response.remainingLikes
            return answer
        }
        router.unary(D.undoPass) { request, context in
            let caller = try await gateway.admit(context, .user)
            let match = try gateway.requireMatch()
            var forwarded = MatchApi.UndoRequest()
            forwarded.swipeId = request.swipeId
            let response = try await match.call(MatchApi.MatchService.Method.undo, forwarded, as: caller)
            var answer = Api.UndoPassResponse()
            answer.swipeId = response.swipeId
            answer.remainingUndos = response.remainingUndos
            // The card to put back: profile's card when it answers in time, else just the id.
            let cards = await gateway.cards(for: [response.targetUserId], caller)
            var card = Api.DeckCard()
            card.profile = cards.cards[response.targetUserId] ?? .with { $0.userId = response.targetUserId }
            answer.card = card
            return answer
        }
        router.unary(D.getDeck) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = DiscoveryApi.GetDeckRequest()
            forwarded.pageSize = request.pageSize
            forwarded.pageToken = request.pageToken
            forwarded.excludeUserIds = request.excludeUserIds
            forwarded.attributeFilters = request.attributeFilters
            let response = try await gateway.requireDiscovery().call(
                DiscoveryApi.DiscoveryService.Method.getDeck, forwarded, as: caller)
            var answer = Api.GetDeckResponse()
            answer.cards = try await gateway.deckCards(response.candidates, caller)
            answer.nextPageToken = response.nextPageToken
            answer.radiusKm = response.radiusKm
            answer.widened = response.widened
            return answer
        }
        router.unary(D.getRecommendations) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = DiscoveryApi.GetRecommendationsRequest()
            forwarded.limit = request.limit
            let response = try await gateway.requireDiscovery().call(
                DiscoveryApi.DiscoveryService.Method.getRecommendations, forwarded, as: caller)
            var answer = Api.GetRecommendationsResponse()
            answer.cards = try await gateway.deckCards(response.candidates, caller, topPicks: true)
            return answer
        }
        router.unary(D.searchMembers) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = DiscoveryApi.SearchMembersRequest()
            forwarded.query = request.query
            forwarded.attributeFilters = request.attributeFilters
            forwarded.maxDistanceKm = request.maxDistanceKm
            forwarded.pageSize = request.pageSize
            forwarded.pageToken = request.pageToken
            let response = try await gateway.requireDiscovery().call(
                DiscoveryApi.DiscoveryService.Method.searchMembers, forwarded, as: caller)
            var answer = Api.SearchMembersResponse()
            answer.cards = try await gateway.deckCards(response.results, caller)
            answer.nextPageToken = response.nextPageToken
            return answer
        }
    }
}

extension Gateway {
    /// Discovery's candidates as cards, in discovery's order. A deck is nothing without its cards, so profile
    /// is essential here: when it does not answer in time the call fails UNAVAILABLE (retry) rather than
    /// showing ids. Candidates profile no longer shows to the caller (deactivated, blocked since the index
    /// saw them) are left out. The distance is discovery's coarse one (whole km between cell centres, DESIGN §5;
    /// 0 when the candidate hides it).
    func deckCards(
        _ candidates: [DiscoveryApi.Candidate],
        _ caller: Caller,
        topPicks: Bool = false
    ) async throws -> [Api.DeckCard] {
        guard !candidates.isEmpty else { return [] }
        // Discovery's answer for this caller: within their preferences by construction (its one predicate).
        let fetched = await self.cards(for: candidates.map(\.userId), caller, source: .deck)
        guard fetched.complete else {
            throw RPCError.detailed(
                .unavailable, "Profiles are not available right now; try again", reason: "PROFILES_UNAVAILABLE",
                retryAfter: .seconds(1))
        }
        return candidates.compactMap { candidate in
            guard var profile = fetched.cards[candidate.userId] else { return nil }
            profile.distanceKm = candidate.distanceKm
            var card = Api.DeckCard()
            card.profile = profile
            card.sharedAttributeKeys = candidate.sharedAttributeKeys
            card.topPick = topPicks
            return card
        }
    }

    /// Home's first deck page (discovery, then profile's cards).
    func homeDeckPart(_ request: Api.GetHomeRequest, _ caller: Caller) -> FanOut<Api.GetHomeResponse>.Part {
        guard let discovery = self.discovery else { return .init(name: "deck", essential: false, fetch: nil) }
        return .init(name: "deck", essential: false) {
            var forwarded = DiscoveryApi.GetDeckRequest()
            forwarded.pageSize = request.deckPageSize == 0 ? 10 : request.deckPageSize  // Home's default
            let response = try await discovery.call(DiscoveryApi.DiscoveryService.Method.getDeck, forwarded, as: caller)
            let cards = try await self.deckCards(response.candidates, caller)
            return { answer in
                answer.deck = cards
                answer.deckNextPageToken = response.nextPageToken
            }
        }
    }

    /// Home's top picks (discovery's recommendations with the reciprocal term).
    func homeTopPicksPart(_ request: Api.GetHomeRequest, _ caller: Caller) -> FanOut<Api.GetHomeResponse>.Part {
        guard let discovery = self.discovery else { return .init(name: "top_picks", essential: false, fetch: nil) }
        return .init(name: "top_picks", essential: false) {
            var forwarded = DiscoveryApi.GetRecommendationsRequest()
            forwarded.limit = request.topPicksLimit
            let response = try await discovery.call(
                DiscoveryApi.DiscoveryService.Method.getRecommendations, forwarded, as: caller)
            let cards = try await self.deckCards(response.candidates, caller, topPicks: true)
            return { $0.topPicks = cards }
        }
    }
}
