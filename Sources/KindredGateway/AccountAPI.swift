import KindredGRPC
import KindredProto

/// `kindred.api.v1.AccountService`: the account lifecycle, served by the auth service.
struct AccountAPI: GRPCService {
    let gateway: Gateway

    func register(in router: inout GRPCRouter) {
        typealias M = Api.AccountService.Method
        typealias A = AuthApi.AuthService.Method
        let gateway = self.gateway
        let auth = gateway.auth

        router.unary(M.signUp) { request, context in
            let caller = try await gateway.admit(context, .anyone)
            let response = try await auth.call(A.signUp, AuthApi.SignUpRequest(request), as: caller)
            var answer = Api.SignUpResponse()
            answer.resendAfterSeconds = response.resendAfterSeconds
            return answer
        }
        router.unary(M.verifyEmail) { request, context in
            let caller = try await gateway.admit(context, .anyone)
            let response = try await auth.call(A.verifyEmail, AuthApi.VerifyEmailRequest(request), as: caller)
            var answer = Api.VerifyEmailResponse()
            answer.email = response.email
            return answer
        }
        router.unary(M.resendVerification) { request, context in
            let caller = try await gateway.admit(context, .anyone)
            let response = try await auth.call(
                A.resendVerification, AuthApi.ResendVerificationRequest(request), as: caller)
            var answer = Api.ResendVerificationResponse()
            answer.resendAfterSeconds = response.resendAfterSeconds
            return answer
        }
        router.unary(M.signIn) { request, context in
            let caller = try await gateway.admit(context, .anyone)
            return Api.SignInResponse(try await auth.call(A.signIn, AuthApi.SignInRequest(request), as: caller))
        }
        router.unary(M.signInWithIdToken) { request, context in
            let caller = try await gateway.admit(context, .anyone)
            return Api.SignInWithIdTokenResponse(
                try await auth.call(A.signInWithIdToken, AuthApi.SignInWithIdTokenRequest(request), as: caller)
            )
        }
        router.unary(M.refresh) { request, context in
            let caller = try await gateway.admit(context, .anyone)
            var forwarded = AuthApi.RefreshRequest()
            forwarded.refreshToken = request.refreshToken
            let response = try await auth.call(A.refresh, forwarded, as: caller)
            var answer = Api.RefreshResponse()
            answer.tokens = response.tokens.map(Api.AuthTokens.init)
            return answer
        }
        router.unary(M.signOut) { request, context in
            let caller = try await gateway.admit(context, .tokenOptional)
            var forwarded = AuthApi.SignOutRequest()
            forwarded.refreshToken = request.refreshToken
            _ = try await auth.call(A.signOut, forwarded, as: caller)
            return Api.SignOutResponse()
        }
        router.unary(M.signOutEverywhere) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = AuthApi.SignOutEverywhereRequest()
            forwarded.keepCurrent = request.keepCurrent
            let response = try await auth.call(A.signOutEverywhere, forwarded, as: caller)
            var answer = Api.SignOutEverywhereResponse()
            answer.endedSessions = response.endedSessions
            return answer
        }
        router.unary(M.getAccount) { _, context in
            let caller = try await gateway.admit(context, .user)
            var answer = Api.GetAccountResponse()
            answer.account = try await gateway.ownAccount(caller)
            return answer
        }
        router.unary(M.checkUsername) { request, context in
            let caller = try await gateway.admit(context, .anyone)
            var forwarded = AuthApi.CheckUsernameRequest()
            forwarded.communityId = request.communityId
            forwarded.username = request.username
            let response = try await auth.call(A.checkUsername, forwarded, as: caller)
            var answer = Api.CheckUsernameResponse()
            answer.available = response.available
            answer.normalizedUsername = response.normalizedUsername
            answer.unavailableReason = response.unavailableReason
            return answer
        }
        router.unary(M.changePassword) { request, context in
            let caller = try await gateway.admit(context, .user)
            let response = try await auth.call(A.changePassword, AuthApi.ChangePasswordRequest(request), as: caller)
            var answer = Api.ChangePasswordResponse()
            answer.endedSessions = response.endedSessions
            return answer
        }
        router.unary(M.requestPasswordReset) { request, context in
            let caller = try await gateway.admit(context, .anyone)
            var forwarded = AuthApi.RequestPasswordResetRequest()
            forwarded.communityId = request.communityId
            forwarded.email = request.email
            _ = try await auth.call(A.requestPasswordReset, forwarded, as: caller)
            return Api.RequestPasswordResetResponse()
        }
        router.unary(M.resetPassword) { request, context in
            let caller = try await gateway.admit(context, .anyone)
            let response = try await auth.call(A.resetPassword, AuthApi.ResetPasswordRequest(request), as: caller)
            var answer = Api.ResetPasswordResponse()
            answer.endedSessions = response.endedSessions
            return answer
        }
        router.unary(M.changeEmail) { request, context in
            let caller = try await gateway.admit(context, .user)
            let response = try await auth.call(A.changeEmail, AuthApi.ChangeEmailRequest(request), as: caller)
            var answer = Api.ChangeEmailResponse()
            answer.pendingEmail = response.pendingEmail
            answer.expiresUnixMs = response.expiresUnixMs
            return answer
        }
        router.unary(M.confirmEmailChange) { request, context in
            let caller = try await gateway.admit(context, .anyone)
            var forwarded = AuthApi.ConfirmEmailChangeRequest()
            forwarded.token = request.token
            let response = try await auth.call(A.confirmEmailChange, forwarded, as: caller)
            var answer = Api.ConfirmEmailChangeResponse()
            answer.email = response.email
            return answer
        }
        router.unary(M.changeUsername) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = AuthApi.ChangeUsernameRequest()
            forwarded.newUsername = request.newUsername
            let response = try await auth.call(A.changeUsername, forwarded, as: caller)
            var answer = Api.ChangeUsernameResponse()
            answer.username = response.username
            return answer
        }
        router.unary(M.listSessions) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = AuthApi.ListSessionsRequest()
            forwarded.pageSize = request.pageSize
            forwarded.pageToken = request.pageToken
            let response = try await auth.call(A.listSessions, forwarded, as: caller)
            var answer = Api.ListSessionsResponse()
            answer.sessions = response.sessions.map(Api.Session.init)
            answer.nextPageToken = response.nextPageToken
            return answer
        }
        router.unary(M.revokeSession) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = AuthApi.RevokeSessionRequest()
            forwarded.sessionId = request.sessionId
            _ = try await auth.call(A.revokeSession, forwarded, as: caller)
            return Api.RevokeSessionResponse()
        }
        router.unary(M.deleteAccount) { request, context in
            let caller = try await gateway.admit(context, .user)
            var forwarded = AuthApi.DeleteAccountRequest()
            forwarded.userId = caller.userID ?? ""
            forwarded.currentPassword = request.currentPassword
            let response = try await auth.call(A.deleteAccount, forwarded, as: caller)
            var answer = Api.DeleteAccountResponse()
            answer.deletedUnixMs = response.deletedUnixMs
            return answer
        }
    }
}

extension Gateway {
    /// The caller's own account (admin-only fields cleared).
    func ownAccount(_ caller: Caller) async throws(RPCError) -> Api.Account {
        var request = AuthApi.GetAccountRequest()
        request.userId = caller.userID ?? ""
        let response = try await self.auth.call(AuthApi.AuthService.Method.getAccount, request, as: caller)
        guard let account = response.account else {
            throw GatewayErrors.make(.internalError, "The server failed to process the call", reason: "INTERNAL")
        }
        return Api.Account(account).ownView
    }
}
