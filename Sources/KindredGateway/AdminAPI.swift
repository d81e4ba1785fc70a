import KindredGRPC
import KindredProto
import KindredProtobuf

/// `kindred.api.v1.AdminService`: moderation and account administration, for callers with the admin role.
/// Account administration is served by auth; report, photo and community administration need the match and
/// profile services and answer UNIMPLEMENTED (reason NOT_DEPLOYED) until the cluster runs them.
struct AdminAPI: GRPCService {
    let gateway: Gateway

    func register(in router: inout GRPCRouter) {
        typealias M = Api.AdminService.Method
        typealias A = AuthApi.AuthService.Method
        let gateway = self.gateway
        let auth = gateway.auth

        router.unary(M.listAccounts) { request, context in
            let caller = try await gateway.admit(context, .admin)
            let response = try await auth.call(A.listAccounts, AuthApi.ListAccountsRequest(request), as: caller)
            var answer = Api.ListAccountsResponse()
            answer.accounts = response.accounts.map(Api.Account.init)
            answer.nextPageToken = response.nextPageToken
            return answer
        }
        router.unary(M.lookupAccount) { request, context in
            let caller = try await gateway.admit(context, .admin)
            var forwarded = AuthApi.GetAccountRequest()
            forwarded.userId = request.userId
            let response = try await auth.call(A.getAccount, forwarded, as: caller)
            var answer = Api.LookupAccountResponse()
            answer.account = response.account.map(Api.Account.init)
            return answer
        }
        router.unary(M.deactivateAccount) { request, context in
            let caller = try await gateway.admit(context, .admin)
            var forwarded = AuthApi.DeactivateAccountRequest()
            forwarded.userId = request.userId
            forwarded.note = request.note
            forwarded.reportId = request.reportId
            let response = try await auth.call(A.deactivateAccount, forwarded, as: caller)
            var answer = Api.DeactivateAccountResponse()
            answer.account = response.account.map(Api.Account.init)
            return answer
        }
        router.unary(M.reactivateAccount) { request, context in
            let caller = try await gateway.admit(context, .admin)
            var forwarded = AuthApi.ReactivateAccountRequest()
            forwarded.userId = request.userId
            forwarded.note = request.note
            let response = try await auth.call(A.reactivateAccount, forwarded, as: caller)
            var answer = Api.ReactivateAccountResponse()
            answer.account = response.account.map(Api.Account.init)
            return answer
        }
        router.unary(M.deleteUserAccount) { request, context in
            let caller = try await gateway.admit(context, .admin)
            guard !request.userId.isEmpty else {
                throw GatewayErrors.make(.invalidArgument, "user_id is required", reason: "INVALID_ARGUMENT")
            }
            var forwarded = AuthApi.DeleteAccountRequest()
            forwarded.userId = request.userId
            let response = try await auth.call(A.deleteAccount, forwarded, as: caller)
            var answer = Api.DeleteUserAccountResponse()
            answer.deletedUnixMs = response.deletedUnixMs
            return answer
        }
        router.unary(M.setAccountRoles) { request, context in
            let caller = try await gateway.admit(context, .admin)
            var forwarded = AuthApi.SetAccountRolesRequest()
            forwarded.userId = request.userId
            forwarded.roles = request.roles
            let response = try await auth.call(A.setAccountRoles, forwarded, as: caller)
            var answer = Api.SetAccountRolesResponse()
            answer.account = response.account.map(Api.Account.init)
            return answer
        }
        router.unary(M.bootstrapAdmin) { request, context in
            // Anyone holding the bootstrap secret; auth compares it and refuses once an admin exists.
            let caller = try await gateway.admit(context, .anyone)
            var forwarded = AuthApi.BootstrapAdminRequest()
            forwarded.bootstrapSecret = request.bootstrapSecret
            forwarded.communityId = request.communityId
            forwarded.login = request.login
            let response = try await auth.call(A.bootstrapAdmin, forwarded, as: caller)
            var answer = Api.BootstrapAdminResponse()
            answer.account = response.account.map(Api.Account.init)
            return answer
        }
        router.unary(M.getUserFootprint) { request, context in
            let caller = try await gateway.admit(context, .admin)
            return try await gateway.userFootprint(request.userId, caller)
        }

        router.unary(M.listReports) { request, context in
            try await gateway.listReports(request, try await gateway.admit(context, .admin))
        }
        router.unary(M.getReportEvidence) { request, context in
            try await gateway.reportEvidence(request, try await gateway.admit(context, .admin))
        }
        router.unary(M.resolveReport) { request, context in
            try await gateway.resolveReport(request, try await gateway.admit(context, .admin))
        }
        // Photos and communities: the profile service (ProfileAPI.swift).
        router.unary(M.removePhoto) { try await gateway.removePhoto($0, $1) }
        router.unary(M.listCommunities) { try await gateway.listCommunities($0, $1) }
        router.unary(M.createCommunity) { try await gateway.createCommunity($0, $1) }
        router.unary(M.updateCommunity) { try await gateway.updateCommunity($0, $1) }
        // Webhook endpoints and deliveries: the notify service (WebhookAPI.swift).
        gateway.registerWebhookRoutes(in: &router)
    }
}

extension Gateway {
    /// Row counts of a user in every service that holds user data, gathered in parallel; services that do not
    /// answer in time (or are not deployed) are listed in `unavailable_parts`.
    func userFootprint(_ userID: String, _ caller: Caller) async throws -> Api.GetUserFootprintResponse {
        guard !userID.isEmpty else {
            throw GatewayErrors.make(.invalidArgument, "user_id is required", reason: "INVALID_ARGUMENT")
        }
        // Every service answers the same common.v1 messages at its own GetUserFootprint.
        typealias Footprint = ProtoMethod<
            Kindred.Common.V1.GetUserFootprintRequest, Kindred.Common.V1.GetUserFootprintResponse
        >
        let services: [(String, Downstream?, Footprint)] = [
            ("auth", self.auth, AuthApi.AuthService.Method.getUserFootprint),
            ("profile", self.profile, ProfileApi.ProfileService.Method.getUserFootprint),
            ("discovery", self.discovery, DiscoveryApi.DiscoveryService.Method.getUserFootprint),
            ("match", self.match, MatchApi.MatchService.Method.getUserFootprint),
            ("chat", self.chat, ChatApi.ChatService.Method.getUserFootprint),
            ("notify", self.notify, NotifyApi.NotifyService.Method.getUserFootprint),
        ]
        let parts = services.map { name, downstream, method -> FanOut<Api.GetUserFootprintResponse>.Part in
            guard let downstream else { return .init(name: name, essential: false, fetch: nil) }
            return .init(name: name, essential: false) {
                let response = try await downstream.call(method, .with { $0.userId = userID }, as: caller)
                return { $0.services.append(.with { $0.service = name; $0.counts = response.counts }) }
            }
        }
        var (answer, missing) = try await FanOut(partTimeout: self.configuration.partTimeout).gather(.init(), parts)
        for part in missing { self.metrics.partMissing("footprint." + part) }
        answer.services.sort { $0.service < $1.service }
        answer.unavailableParts = missing
        answer.totalRows = answer.services.reduce(0) { $0 + $1.counts.reduce(0) { $0 + $1.rows } }
        return answer
    }
}
