import KindredGRPC
import KindredProto

/// `kindred.api.v1.ActivityService`: activity broadcasts ("working out now") in follow communities, served by the
/// match service (which tells notify whom to push); followers see them in Home (`homeActivitiesPart`).
struct ActivityAPI: GRPCService {
    let gateway: Gateway

    func register(in router: inout GRPCRouter) {
        typealias P = Api.ActivityService.Method
        typealias M = MatchApi.MatchService.Method
        let gateway = self.gateway
        router.unary(P.startActivity) { request, context in
            let caller = try await gateway.admit(context, .user)
            let response = try await gateway.requireMatch().call(
                M.startActivity,
                .with {
                    $0.activity = request.activity
                    $0.idempotencyKey = request.idempotencyKey
                },
                as: caller
            )
            return .with {
                $0.broadcast = response.broadcast.map { Api.ActivityBroadcast($0, profile: nil) }
                $0.followersNotified = response.followersNotified
                $0.nextNotifyUnixMs = response.nextNotifyUnixMs
                $0.replayed = response.replayed
            }
        }
        router.unary(P.stopActivity) { _, context in
            let caller = try await gateway.admit(context, .user)
            let response = try await gateway.requireMatch().call(M.stopActivity, .init(), as: caller)
            return .with { $0.broadcastId = response.broadcastId }
        }
    }
}

extension Gateway {
    /// Home's active broadcasts of members the caller follows, with their cards (as the caller sees them).
    func homeActivitiesPart(_ caller: Caller) -> FanOut<Api.GetHomeResponse>.Part {
        guard let match = self.match else { return .init(name: "activities", essential: false, fetch: nil) }
        return .init(name: "activities", essential: false) {
            let response = try await match.call(
                MatchApi.MatchService.Method.listFollowedActivities,
                .with { $0.pageSize = 20 },
                as: caller
            )
            let cards = await self.cards(for: response.broadcasts.map(\.userId), caller)
            return { answer in
                answer.followedActivities = response.broadcasts.map {
                    Api.ActivityBroadcast($0, profile: cards.cards[$0.userId])
                }
            }
        }
    }
}

extension Api.ActivityBroadcast {
    init(_ broadcast: MatchApi.ActivityBroadcast, profile: Api.ProfileCard?) {
        self.init()
        self.broadcastId = broadcast.broadcastId
        self.userId = broadcast.userId
        self.activity = broadcast.activity
        self.startedUnixMs = broadcast.startedUnixMs
        self.expiresUnixMs = broadcast.expiresUnixMs
        self.profile = profile
    }
}
