import KindredGRPC
import KindredProto

typealias MatchApi = Kindred.Match.V1
typealias ProfileApi = Kindred.Profile.V1

/// `kindred.api.v1.DeckService`: swiping (the match service). GetDeck, GetRecommendations and SearchMembers
/// need the discovery service and answer UNIMPLEMENTED (reason NOT_DEPLOYED) until the cluster runs it.
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
        router.unary(D.getDeck) { _, context in try await Self.notDeployed(gateway, context) }
        router.unary(D.getRecommendations) { _, context in try await Self.notDeployed(gateway, context) }
        router.unary(D.searchMembers) { _, context in try await Self.notDeployed(gateway, context) }
    }

    private static func notDeployed<Response>(_ gateway: Gateway, _ context: ServerContext) async throws -> Response {
        _ = try await gateway.admit(context, .user)
        throw GatewayErrors.notDeployed("The deck")
    }
}
