import KindredProto
import KindredProtobuf

// The public API (kindred.api.v1) and the auth service's internal API (kindred.auth.v1) are separate contracts
// that happen to look alike; these initialisers are the only place where one becomes the other, field by field,
// so a change to either contract is a compile error here rather than a silent wire mismatch.

extension ProtoEnum {
    /// The same number in another enum (the public and internal enums share their numbering).
    init<Other: ProtoEnum>(converting other: Other) { self.init(rawValue: other.rawValue) }
}

// MARK: Shared shapes

extension Api.Account {
    init(_ account: AuthApi.Account) {
        self.init()
        self.userId = account.userId
        self.communityId = account.communityId
        self.email = account.email
        self.emailVerified = account.emailVerified
        self.pendingEmail = account.pendingEmail
        self.username = account.username
        self.roles = account.roles
        self.status = Api.AccountStatus(converting: account.status)
        self.passwordSet = account.passwordSet
        self.linkedProviders = account.identities.map(\.provider)
        self.createdUnixMs = account.createdUnixMs
        self.lastSignInUnixMs = account.lastSignInUnixMs
        self.deactivatedUnixMs = account.deactivatedUnixMs
        self.deactivationNote = account.deactivationNote
    }

    /// The account as its owner sees it: admin-only fields cleared.
    var ownView: Api.Account {
        var account = self
        account.deactivatedUnixMs = 0
        account.deactivationNote = ""
        return account
    }
}

extension Api.AuthTokens {
    init(_ tokens: AuthApi.TokenBundle) {
        self.init()
        self.accessToken = tokens.accessToken
        self.accessTokenExpiresUnixMs = tokens.accessTokenExpiresUnixMs
        self.refreshToken = tokens.refreshToken
        self.refreshTokenExpiresUnixMs = tokens.refreshTokenExpiresUnixMs
        self.sessionId = tokens.sessionId
    }
}

extension AuthApi.ClientInfo {
    init(_ client: Api.ClientInfo) {
        self.init()
        self.deviceName = client.deviceName
        self.userAgent = client.userAgent
    }
}

extension Api.Session {
    init(_ session: AuthApi.Session) {
        self.init()
        self.sessionId = session.sessionId
        self.signInMethod = Api.SignInMethod(converting: session.signInMethod)
        self.deviceName = session.deviceName
        self.userAgent = session.userAgent
        self.current = session.current
        self.createdUnixMs = session.createdUnixMs
        self.lastUsedUnixMs = session.lastUsedUnixMs
        self.expiresUnixMs = session.expiresUnixMs
    }
}

// MARK: Account lifecycle

extension AuthApi.SignUpRequest {
    init(_ request: Api.SignUpRequest) {
        self.init()
        self.communityId = request.communityId
        self.email = request.email
        self.password = request.password
        self.username = request.username
        self.locale = request.locale
    }
}

extension AuthApi.VerifyEmailRequest {
    init(_ request: Api.VerifyEmailRequest) {
        self.init()
        switch request.proof {
        case .token(let token): self.proof = .token(token)
        case .code(let typed):
            var code = AuthApi.EmailCode()
            code.communityId = typed.communityId
            code.email = typed.email
            code.code = typed.code
            self.proof = .code(code)
        case nil: self.proof = nil
        }
    }
}

extension AuthApi.ResendVerificationRequest {
    init(_ request: Api.ResendVerificationRequest) {
        self.init()
        self.communityId = request.communityId
        self.email = request.email
    }
}

extension AuthApi.SignInRequest {
    init(_ request: Api.SignInRequest) {
        self.init()
        self.communityId = request.communityId
        self.login = request.login
        self.password = request.password
        self.client = request.client.map(AuthApi.ClientInfo.init)
    }
}

extension Api.SignInResponse {
    init(_ response: AuthApi.SignInResponse) {
        self.init()
        self.tokens = response.tokens.map(Api.AuthTokens.init)
        self.account = response.account.map { Api.Account($0).ownView }
    }
}

extension AuthApi.SignInWithIdTokenRequest {
    init(_ request: Api.SignInWithIdTokenRequest) {
        self.init()
        self.communityId = request.communityId
        self.provider = request.provider
        self.idToken = request.idToken
        self.nonce = request.nonce
        self.username = request.username
        self.client = request.client.map(AuthApi.ClientInfo.init)
        self.locale = request.locale
    }
}

extension Api.SignInWithIdTokenResponse {
    init(_ response: AuthApi.SignInWithIdTokenResponse) {
        self.init()
        self.tokens = response.tokens.map(Api.AuthTokens.init)
        self.account = response.account.map { Api.Account($0).ownView }
        self.accountCreated = response.accountCreated
    }
}

extension AuthApi.ChangePasswordRequest {
    init(_ request: Api.ChangePasswordRequest) {
        self.init()
        self.currentPassword = request.currentPassword
        self.newPassword = request.newPassword
    }
}

extension AuthApi.ResetPasswordRequest {
    init(_ request: Api.ResetPasswordRequest) {
        self.init()
        self.token = request.token
        self.newPassword = request.newPassword
    }
}

extension AuthApi.ChangeEmailRequest {
    init(_ request: Api.ChangeEmailRequest) {
        self.init()
        self.currentPassword = request.currentPassword
        self.newEmail = request.newEmail
    }
}

// MARK: Admin

extension AuthApi.ListAccountsRequest {
    init(_ request: Api.ListAccountsRequest) {
        self.init()
        self.communityId = request.communityId
        self.query = request.query
        self.status = AuthApi.AccountStatus(converting: request.status)
        self.pageSize = request.pageSize
        self.pageToken = request.pageToken
    }
}
