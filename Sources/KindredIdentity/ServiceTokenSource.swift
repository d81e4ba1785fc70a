import Foundation
import KindredGRPC
import KindredProto
import Synchronization

/// The service token a service sends on its calls to other services (`authorization: Bearer <token>`).
///
/// Tokens come from auth's IssueServiceToken (or, inside auth, from its own signer) through `fetch`. One
/// token is shared by every call and fetched again `refreshMargin` before it expires, so a call never
/// leaves with a token about to lapse; concurrent callers wait for the same fetch. After a peer answers
/// UNAUTHENTICATED (auth rotated its key, the clock jumped), ``invalidate()`` makes the next call fetch.
///
/// ```swift
/// let tokens = ServiceTokenSource(auth: authClient, serviceName: "match", secret: secret)
/// let reply = try await chat.unary(method, request, metadata: try await tokens.metadata())
/// ```
public final class ServiceTokenSource: Sendable {
    /// A fetched token and when it expires (UTC ms), as IssueServiceToken returns them.
    public typealias Fetch = @Sendable () async throws -> (token: String, expiresUnixMs: Int64)

    private let fetch: Fetch
    private let refreshMargin: Duration
    private let now: @Sendable () -> Date
    private let state = Mutex(State())

    private struct State {
        var cache = ServiceTokenCache()
        var inFlight: Task<String, any Error>?
    }

    /// - Parameters:
    ///   - refreshMargin: how long before expiry a token is replaced (capped at half its lifetime). Default 60 s.
    ///   - now: the clock (tests move it).
    public init(
        refreshMargin: Duration = .seconds(60),
        now: @escaping @Sendable () -> Date = Date.init,
        fetch: @escaping Fetch
    ) {
        self.fetch = fetch
        self.refreshMargin = refreshMargin
        self.now = now
    }

    /// Tokens from auth's IssueServiceToken for `serviceName` with its secret (auth's
    /// `KINDRED_AUTH_SERVICE_SECRET_<NAME>`).
    public convenience init(
        auth: GRPCClient,
        serviceName: String,
        secret: String,
        refreshMargin: Duration = .seconds(60)
    ) {
        self.init(refreshMargin: refreshMargin) {
            var request = Kindred.Auth.V1.IssueServiceTokenRequest()
            request.serviceName = serviceName
            request.clientSecret = secret
            let response = try await auth.unary(
                Kindred.Auth.V1.AuthService.Method.issueServiceToken,
                request,
                options: CallOptions(timeout: .seconds(5))
            )
            return (response.accessToken, response.expiresUnixMs)
        }
    }

    /// A token valid for at least the refresh margin (fetching one if needed).
    public func token() async throws -> String {
        enum Next {
            case cached(String)
            case wait(Task<String, any Error>)
        }
        let now = self.now()
        let next: Next = self.state.withLock { state in
            if let token = state.cache.usableToken(at: now) { return .cached(token) }
            if let inFlight = state.inFlight { return .wait(inFlight) }
            let task = Task { [fetch, refreshMargin, self] in
                defer { self.state.withLock { $0.inFlight = nil } }
                let (token, expires) = try await fetch()
                let fetchedAt = self.now()
                self.state.withLock {
                    $0.cache.store(token: token, expiresUnixMs: expires, fetchedAt: fetchedAt, margin: refreshMargin)
                }
                return token
            }
            state.inFlight = task
            return .wait(task)
        }
        switch next {
        case .cached(let token): return token
        case .wait(let task): return try await task.value
        }
    }

    /// `authorization: Bearer <token>` for a call.
    public func metadata() async throws -> Metadata {
        var metadata = Metadata()
        metadata.add("authorization", "Bearer " + (try await self.token()))
        return metadata
    }

    /// Forgets the cached token (after a peer refused it); the next call fetches a new one.
    public func invalidate() {
        self.state.withLock { $0.cache = ServiceTokenCache() }
    }
}

/// When a cached service token must be replaced: a value type, tested without a clock or a network.
struct ServiceTokenCache: Sendable, Hashable {
    private(set) var token: String?
    /// The instant from which the token is no longer handed out.
    private(set) var refreshAt: Date?

    /// Keeps `token` until `margin` before its expiry, or half its remaining lifetime when that is shorter.
    mutating func store(token: String, expiresUnixMs: Int64, fetchedAt: Date, margin: Duration) {
        let expiry = Date(timeIntervalSince1970: Double(expiresUnixMs) / 1000)
        let lifetime = max(0, expiry.timeIntervalSince(fetchedAt))
        let marginSeconds = Double(margin.components.seconds) + Double(margin.components.attoseconds) / 1e18
        self.token = token
        self.refreshAt = expiry.addingTimeInterval(-min(marginSeconds, lifetime / 2))
    }

    /// The token if it may still be used at `now`.
    func usableToken(at now: Date) -> String? {
        guard let token, let refreshAt, now < refreshAt else { return nil }
        return token
    }
}
