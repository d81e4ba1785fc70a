import Foundation
import KindredGRPC
import KindredOpenSSL
import NIOConcurrencyHelpers

/// Who is calling: the verified claims of the caller's access token.
public struct CallerIdentity: Hashable, Sendable {
    public let claims: AccessTokenClaims

    /// The user id, or nil for a service token.
    public var userID: String? { self.claims.sub.hasPrefix("service:") ? nil : self.claims.sub }
    /// The service name for a service token.
    public var serviceName: String? {
        self.claims.sub.hasPrefix("service:") ? String(self.claims.sub.dropFirst("service:".count)) : nil
    }
    public var sessionID: String? { self.claims.sid }
    public func hasRole(_ role: String) -> Bool { self.claims.roles.contains(role) }
    public var isAdmin: Bool { self.hasRole("admin") }
    public var isService: Bool { self.hasRole("service") && self.serviceName != nil }

    /// Throws PERMISSION_DENIED unless the caller is `userID` (or a service acting for users).
    public func requireSelf(_ userID: String) throws(RPCError) {
        guard self.userID == userID || self.isService else {
            throw RPCError(.permissionDenied, "Not allowed for this caller")
        }
    }
}

/// Authenticates calls in every service: reads `authorization: Bearer <token>`, verifies it with auth's public
/// keys (cached; refetched when a token names an unknown key, at most once per `refetchInterval`), and, when
/// given `revocations`, refuses tokens whose session has ended (UNAUTHENTICATED) or whose session cannot be
/// checked because the revocation feed is stale (UNAVAILABLE: fail closed). The revocation check runs on
/// every call, cached tokens included.
public final class CallerAuthenticator: Sendable {
    /// Fetches auth's current public keys (key id → key), e.g. by calling auth's GetPublicKeys.
    public typealias KeyFetcher = @Sendable () async throws -> [String: Ed25519PublicKey]

    private let fetchKeys: KeyFetcher
    private let refetchInterval: Duration
    /// Ended sessions (nil: no session check, for tools and tests that have no feed).
    public let revocations: RevokedSessions?
    private let state = NIOLockedValueBox(State())

    private struct State {
        var verifier = AccessTokenVerifier(keys: [:]) {
            didSet { self.verified.removeAll() }  // new keys: verify everything again
        }
        var lastFetch: ContinuousClock.Instant?
        /// Tokens whose signature and claims were verified, by token text. A client sends the same access token
        /// on every call for up to 15 minutes, so most calls skip the Ed25519 verification and the JSON
        /// parsing; the time checks (exp, nbf) still run on every call.
        var verified: [String: AccessTokenClaims] = [:]
        /// When (token time, seconds) the expired tokens leave `verified` next.
        var nextPrune: Int64 = 0
    }

    /// Bound on `verified`; when full of unexpired tokens it is emptied (cheap, and a flood of distinct tokens
    /// can't grow it).
    private static let maxCachedTokens = 10_000
    /// Expired tokens leave `verified` at most this often, when a token is added: the table holds the tokens
    /// still valid (one or two per client: the one in use and, until it expires, the one it replaced) and those
    /// that expired since the last pass. Left until the table was full, every refresh added its new token beside
    /// the old: a gateway serving 800 members grew by about a mebibyte every ten minutes.
    static let pruneIntervalSeconds: Int64 = 60

    /// Tokens held as verified (tests).
    var cachedTokenCount: Int { self.state.withLockedValue { $0.verified.count } }

    public init(
        refetchInterval: Duration = .seconds(30),
        revocations: RevokedSessions? = nil,
        fetchKeys: @escaping KeyFetcher
    ) {
        self.fetchKeys = fetchKeys
        self.refetchInterval = refetchInterval
        self.revocations = revocations
    }

    /// Uses fixed keys (auth itself, tests).
    public convenience init(keys: [String: Ed25519PublicKey], revocations: RevokedSessions? = nil) {
        self.init(refetchInterval: .seconds(3600 * 24 * 365), revocations: revocations) { keys }
        self.state.withLockedValue { $0.verifier.keys = keys }
    }

    /// Fetches the keys now, whatever the refetch interval (at startup); false when the fetch failed.
    @discardableResult
    public func prefetch() async -> Bool {
        guard let keys = try? await self.fetchKeys() else { return false }
        self.state.withLockedValue {
            $0.verifier.keys = keys
            $0.lastFetch = ContinuousClock.now
        }
        return true
    }

    /// Whether any key is known (false until the first successful fetch).
    public var hasKeys: Bool { self.state.withLockedValue { !$0.verifier.keys.isEmpty } }

    /// The caller of this call; UNAUTHENTICATED when the token is missing, malformed, forged or expired, or its
    /// session has ended; UNAVAILABLE when no signing key was fetched yet or session ends cannot be checked (the
    /// feed is stale).
    public func authenticate(_ context: ServerContext) async throws(RPCError) -> CallerIdentity {
        guard let header = context.metadata["authorization"] else {
            throw RPCError(.unauthenticated, "Missing authorization metadata")
        }
        return try await self.authenticate(authorization: header)
    }

    /// `checkingSession: false` skips the revocation check (only for signing out, which is idempotent).
    public func authenticate(
        authorization header: String,
        now: Int64 = Int64(Date().timeIntervalSince1970),
        checkingSession: Bool = true
    ) async throws(RPCError) -> CallerIdentity {
        let prefix = "Bearer "
        guard header.hasPrefix(prefix) else {
            throw RPCError(.unauthenticated, "Authorization must be a Bearer token")
        }
        let token = String(header.dropFirst(prefix.count))
        if let (claims, leeway) = self.state.withLockedValue({ state in
            state.verified[token].map { ($0, state.verifier.leewaySeconds) }
        }) {
            guard claims.exp > now - leeway, claims.nbf <= now + leeway else {
                throw RPCError(.unauthenticated, "Invalid access token: expired")
            }
            if checkingSession { try self.checkSession(claims) }
            return CallerIdentity(claims: claims)
        }
        if let kid = AccessTokenVerifier.keyID(of: token), !self.knows(kid) {
            await self.refreshKeys()
        }
        let verifier = self.state.withLockedValue { $0.verifier }
        // No key at all yet (a service just started, auth not answering): the token cannot be judged, so the call
        // is refused as retryable, not as a bad token (an app signs its member out on UNAUTHENTICATED).
        guard !verifier.keys.isEmpty else { throw RPCError(.unavailable, Self.keysUnavailable) }
        let claims: AccessTokenClaims
        do {
            claims = try verifier.verify(token, now: now)
        } catch {
            throw RPCError(.unauthenticated, "Invalid access token: \(error)")
        }
        self.state.withLockedValue { state in
            // Only under the keys it was verified with (a refetch may have happened meanwhile).
            guard state.verifier.keys == verifier.keys else { return }
            if now >= state.nextPrune {
                let leeway = state.verifier.leewaySeconds
                state.verified = state.verified.filter { $0.value.exp > now - leeway }
                state.nextPrune = now + Self.pruneIntervalSeconds
            }
            if state.verified.count >= Self.maxCachedTokens { state.verified.removeAll(keepingCapacity: true) }
            state.verified[token] = claims
        }
        if checkingSession { try self.checkSession(claims) }
        return CallerIdentity(claims: claims)
    }

    /// Message of the UNAVAILABLE answer before auth's signing keys were ever fetched.
    public static let keysUnavailable = "Access tokens cannot be checked yet; retry with backoff"

    /// Message of the UNAVAILABLE answer when the revocation feed is stale.
    public static let sessionCheckUnavailable = "Session checks are temporarily unavailable; retry with backoff"

    private func checkSession(_ claims: AccessTokenClaims) throws(RPCError) {
        guard let revocations = self.revocations, let sessionID = claims.sid else { return }
        switch revocations.verdict(sessionID) {
        case .live: return
        case .revoked: throw RPCError(.unauthenticated, "The session has ended")
        case .unknown: throw RPCError(.unavailable, Self.sessionCheckUnavailable)
        }
    }

    private func knows(_ kid: String) -> Bool {
        self.state.withLockedValue { $0.verifier.keys[kid] != nil }
    }

    private func refreshKeys() async {
        let now = ContinuousClock.now
        let due = self.state.withLockedValue { state -> Bool in
            if let last = state.lastFetch, now - last < self.refetchInterval { return false }
            state.lastFetch = now
            return true
        }
        guard due, let keys = try? await self.fetchKeys() else { return }
        self.state.withLockedValue { $0.verifier.keys = keys }
    }
}
