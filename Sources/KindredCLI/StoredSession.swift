import KindredProto

/// What `session.json` holds: where the session lives, who it belongs to, and its tokens.
public struct StoredSession: Codable, Hashable, Sendable {
    /// The file format; a file with another version is refused rather than misread.
    public var version = 1
    /// The gateway address, `host:port`.
    public var gateway: String
    public var tls: Bool
    public var caFile: String?
    public var community: String
    public var userId: String
    public var username: String
    public var sessionId: String
    public var accessToken: String
    public var accessTokenExpiresUnixMs: Int64
    public var refreshToken: String
    public var refreshTokenExpiresUnixMs: Int64

    public init(
        target: GatewayTarget,
        community: String,
        userId: String,
        username: String,
        tokens: Kindred.Api.V1.AuthTokens
    ) {
        self.gateway = target.address
        self.tls = target.tls
        self.caFile = target.caFile
        self.community = community
        self.userId = userId
        self.username = username
        self.sessionId = tokens.sessionId
        self.accessToken = tokens.accessToken
        self.accessTokenExpiresUnixMs = tokens.accessTokenExpiresUnixMs
        self.refreshToken = tokens.refreshToken
        self.refreshTokenExpiresUnixMs = tokens.refreshTokenExpiresUnixMs
    }

    /// Takes the rotated tokens of a refresh.
    public mutating func apply(_ tokens: Kindred.Api.V1.AuthTokens) {
        self.accessToken = tokens.accessToken
        self.accessTokenExpiresUnixMs = tokens.accessTokenExpiresUnixMs
        self.refreshToken = tokens.refreshToken
        self.refreshTokenExpiresUnixMs = tokens.refreshTokenExpiresUnixMs
        if !tokens.sessionId.isEmpty { self.sessionId = tokens.sessionId }
    }

    /// Whether this session is the one to use for `settings` (same gateway and community).
    func belongs(to settings: Settings) -> Bool {
        self.gateway == settings.target.address && self.community == settings.community
    }

    /// "alice at 127.0.0.1:50050 (community demo)".
    var place: String { "\(self.gateway) (community \(self.community))" }
}

/// When the stored access token should be refreshed before a call.
public struct RefreshPolicy: Sendable {
    /// Refresh this long before the access token expires (the API asks for a minute), so a call that
    /// starts with it does not reach the server just after it expired.
    public var margin: Duration = .seconds(60)

    public enum Decision: Hashable, Sendable {
        /// The access token is good for the call.
        case useAccessToken
        /// Refresh first.
        case refresh
        /// The refresh token has expired too: only a new sign-in helps.
        case signInAgain
    }

    public init(margin: Duration = .seconds(60)) {
        self.margin = margin
    }

    public func decision(for session: StoredSession, nowUnixMs: Int64) -> Decision {
        let marginMs = self.margin.milliseconds
        // 0 means "not set": the server did not say, so the token is not known to be expired.
        if session.refreshTokenExpiresUnixMs != 0 && session.refreshTokenExpiresUnixMs <= nowUnixMs {
            return .signInAgain
        }
        if session.accessToken.isEmpty || session.accessTokenExpiresUnixMs - marginMs <= nowUnixMs {
            return .refresh
        }
        return .useAccessToken
    }
}
