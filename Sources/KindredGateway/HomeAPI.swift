import KindredGRPC
import KindredProto

/// `kindred.api.v1.HomeService`: the start screen in one round trip, built by `FanOut`.
///
/// Today the cluster runs auth only, so the answer holds the account and lists the other parts as
/// unavailable. As the profile, discovery, match and chat services arrive, each adds its part here (a fetch
/// that returns how to fill its fields) and the same deadline, partial-answer and metrics rules apply.
struct HomeAPI: GRPCService {
    let gateway: Gateway

    func register(in router: inout GRPCRouter) {
        let gateway = self.gateway
        router.unary(Api.HomeService.Method.getHome) { request, context in
            let caller = try await gateway.admit(context, .user)
            return try await gateway.home(request, caller)
        }
    }
}

extension Gateway {
    /// The parts of the Home screen, in the order `unavailable_parts` lists them.
    func homeParts(_ request: Api.GetHomeRequest, _ caller: Caller) -> [FanOut<Api.GetHomeResponse>.Part] {
        [
            // Essential: proves the session is live and names the caller.
            .init(name: "account", essential: true) {
                let account = try await self.ownAccount(caller)
                return { $0.account = account }
            },
            self.homeProfilePart(caller),
            self.homeCommunityPart(caller),
            self.homeDeckPart(request, caller),
            self.homeTopPicksPart(request, caller),
            self.homeMatchesPart(request, caller),
            self.homeChatPart(caller),
            self.homeLikesPart(caller),
            self.homeActivitiesPart(caller),
        ]
    }

    /// Essential once the cluster runs the profile service; a caller without a profile gets needs_profile.
    func homeProfilePart(_ caller: Caller) -> FanOut<Api.GetHomeResponse>.Part {
        guard self.profile != nil else { return .init(name: "profile", essential: false, fetch: nil) }
        return .init(name: "profile", essential: true) {
            let profile = try await self.ownProfileOrNil(caller)
            return {
                $0.profile = profile
                $0.needsProfile = profile == nil
            }
        }
    }

    func homeCommunityPart(_ caller: Caller) -> FanOut<Api.GetHomeResponse>.Part {
        guard self.profile != nil else { return .init(name: "community", essential: false, fetch: nil) }
        return .init(name: "community", essential: false) {
            let community = try await self.ownCommunity(caller)
            return { $0.community = community }
        }
    }

    func home(_ request: Api.GetHomeRequest, _ caller: Caller) async throws -> Api.GetHomeResponse {
        try Self.validate(request)
        let fanOut = FanOut<Api.GetHomeResponse>(partTimeout: self.configuration.partTimeout)
        var (answer, missing) = try await fanOut.gather(.init(), self.homeParts(request, caller))
        for part in missing { self.metrics.partMissing("home." + part) }
        answer.unavailableParts = missing
        return answer
    }

    static func validate(_ request: Api.GetHomeRequest) throws(RPCError) {
        var violations: [Kindred.Common.V1.FieldViolation] = []
        func check(_ value: Int32, _ range: ClosedRange<Int32>, _ field: String) {
            guard !range.contains(value) else { return }
            var violation = Kindred.Common.V1.FieldViolation()
            violation.field = field
            violation.reason = "OUT_OF_RANGE"
            violation.hint = "\(range.lowerBound)..\(range.upperBound)"
            violations.append(violation)
        }
        check(request.deckPageSize, 0...20, "deck_page_size")
        check(request.matchesPageSize, 0...20, "matches_page_size")
        check(request.topPicksLimit, 0...10, "top_picks_limit")
        guard violations.isEmpty else {
            var detail = Kindred.Common.V1.ErrorDetail()
            detail.reason = "INVALID_ARGUMENT"
            detail.fieldViolations = violations
            throw RPCError(
                .invalidArgument,
                "Invalid " + violations.map(\.field).joined(separator: ", "),
                metadata: GatewayErrors.trailer(detail)
            )
        }
    }
}
