import Foundation
import KindredGRPC
import KindredOpenSSL
import KindredProto
import KindredProtobuf
import Logging

/// Sends unary calls to the gateway. The real one is a `GRPCClient`; tests put a scripted one in its place.
public protocol GatewayTransport: Sendable {
    func unary<Request: ProtoMessage, Response: ProtoMessage>(
        _ method: ProtoMethod<Request, Response>,
        _ request: Request,
        metadata: Metadata
    ) async throws -> Response
}

/// The gateway's public API as the CLI uses it: anonymous calls, and calls as the signed-in user that
/// refresh the stored tokens when needed.
///
/// Authenticated calls refresh first when the access token expires within `RefreshPolicy.margin`, and
/// refresh and retry once when the gateway answers UNAUTHENTICATED anyway (clock skew, a revoked access
/// token). Wrong passwords (UNAUTHENTICATED with INVALID_CREDENTIALS) are not retried.
public struct GatewayClient: Sendable {
    public typealias API = Kindred.Api.V1.AccountService.Method

    let transport: any GatewayTransport
    public let store: SessionStore
    public let settings: Settings
    let policy: RefreshPolicy
    /// Milliseconds since the Unix epoch.
    let now: @Sendable () -> Int64

    public init(
        transport: any GatewayTransport,
        store: SessionStore,
        settings: Settings,
        policy: RefreshPolicy = RefreshPolicy(),
        now: @escaping @Sendable () -> Int64 = { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }
    ) {
        self.transport = transport
        self.store = store
        self.settings = settings
        self.policy = policy
        self.now = now
    }

    /// Calls an RPC that anyone may call.
    public func call<Request, Response>(_ method: ProtoMethod<Request, Response>, _ request: Request) async throws
        -> Response
    {
        try await self.transport.unary(method, request, metadata: [:])
    }

    /// Calls an RPC as the signed-in user.
    public func authenticated<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ request: Request
    ) async throws -> Response {
        let session = try await self.usableSession()
        do {
            return try await self.transport.unary(method, request, metadata: Self.bearer(session))
        } catch let error as RPCError where error.code == .unauthenticated && error.reason != "INVALID_CREDENTIALS" {
            let refreshed = try await self.refresh(session)
            return try await self.transport.unary(method, request, metadata: Self.bearer(refreshed))
        }
    }

    /// The stored session for these settings.
    public func storedSession() throws(CLIError) -> StoredSession {
        guard let session = try self.store.load() else { throw .notSignedIn }
        guard session.belongs(to: self.settings) else {
            throw .sessionMismatch(
                signedIn: session.place,
                requested: "\(self.settings.target.address) (community \(self.settings.community))"
            )
        }
        return session
    }

    /// The stored session, refreshed first if its access token is about to expire.
    public func usableSession() async throws -> StoredSession {
        let session = try self.storedSession()
        switch self.policy.decision(for: session, nowUnixMs: self.now()) {
        case .useAccessToken:
            return session
        case .refresh:
            return try await self.refresh(session)
        case .signInAgain:
            try self.store.remove()
            throw CLIError.sessionEnded(reason: nil)
        }
    }

    /// Exchanges the refresh token of `stale` for new tokens and stores them before returning: the old refresh
    /// token is spent once the server answers, so the new one must not be lost.
    func refresh(_ stale: StoredSession) async throws -> StoredSession {
        try await self.store.withLock(timeout: self.settings.timeout) {
            // Another kindred process may have refreshed while this one waited for the lock.
            let current = try self.storedSession()
            if current.refreshToken != stale.refreshToken,
                self.policy.decision(for: current, nowUnixMs: self.now()) == .useAccessToken
            {
                return current
            }
            let response: Kindred.Api.V1.RefreshResponse
            do {
                response = try await self.transport.unary(
                    API.refresh,
                    .with { $0.refreshToken = current.refreshToken },
                    metadata: [:]
                )
            } catch let error as RPCError where error.code == .unauthenticated {
                // Expired, revoked, or reused: this session is over for good.
                try self.store.remove()
                throw CLIError.sessionEnded(reason: error.reason)
            }
            guard let tokens = response.tokens, !tokens.accessToken.isEmpty, !tokens.refreshToken.isEmpty else {
                throw RPCError(.internalError, "The gateway answered the refresh without tokens")
            }
            var next = current
            next.apply(tokens)
            try self.store.save(next)
            return next
        }
    }

    /// Signs in and stores the new session, replacing (and signing out, best effort) a previous one.
    public func signIn(
        login: String,
        password: String,
        client: Kindred.Api.V1.ClientInfo
    ) async throws -> (session: StoredSession, account: Kindred.Api.V1.Account) {
        let response = try await self.call(
            API.signIn,
            .with {
                $0.communityId = self.settings.community
                $0.login = login
                $0.password = password
                $0.client = client
            }
        )
        guard let tokens = response.tokens, !tokens.accessToken.isEmpty, let account = response.account else {
            throw RPCError(.internalError, "The gateway answered the sign-in without tokens")
        }
        let session = StoredSession(
            target: self.settings.target,
            community: self.settings.community,
            userId: account.userId,
            username: account.username,
            tokens: tokens
        )
        let previous = try await self.store.withLock(timeout: self.settings.timeout) {
            let previous = try? self.store.load()
            try self.store.save(session)
            return previous
        }
        if let previous, previous.belongs(to: self.settings), previous.refreshToken != session.refreshToken {
            // Not needed for correctness: it only keeps the account's session list free of orphans.
            _ = try? await self.signOut(previous)
        }
        return (session, account)
    }

    /// Ends `session` on the server. Sends the access token while it is valid, and the refresh token so the
    /// call also works after the access token expired.
    func signOut(_ session: StoredSession) async throws {
        let stillValid = self.policy.decision(for: session, nowUnixMs: self.now()) == .useAccessToken
        _ = try await self.transport.unary(
            API.signOut,
            .with { $0.refreshToken = session.refreshToken },
            metadata: stillValid ? Self.bearer(session) : [:]
        )
    }

    static func bearer(_ session: StoredSession) -> Metadata {
        ["authorization": .string("Bearer \(session.accessToken)")]
    }
}

/// The transport over a `GRPCClient` to the resolved gateway.
public struct GRPCGatewayTransport: GatewayTransport {
    let client: GRPCClient

    /// Connects lazily (on the first call). Throws `CLIError` when the CA file cannot be used.
    public init(settings: Settings) throws(CLIError) {
        let target = settings.target
        var configuration = GRPCClientConfiguration(host: target.host, port: target.port)
        if target.tls {
            if let caFile = target.caFile, !FileManager.default.isReadableFile(atPath: caFile) {
                throw .usage("cannot read the CA file \(caFile)")
            }
            do {
                configuration.tls = try TLSContext(
                    configuration: .client(trustRoots: target.caFile.map { .file($0) } ?? .systemDefault)
                )
            } catch {
                throw .usage("cannot set up TLS: \(error)")
            }
        }
        configuration.connectionCount = 1
        configuration.defaultTimeout = settings.timeout
        configuration.connectTimeout = min(settings.timeout, .seconds(5))
        // A command makes a few calls; the runtime's debug logs are of no use to its user.
        let logger = Logger(label: "kindred.cli", factory: { _ in SwiftLogNoOpLogHandler() })
        self.client = GRPCClient(configuration: configuration, logger: logger)
    }

    public func unary<Request: ProtoMessage, Response: ProtoMessage>(
        _ method: ProtoMethod<Request, Response>,
        _ request: Request,
        metadata: Metadata
    ) async throws -> Response {
        try await self.client.unary(method, request, metadata: metadata)
    }

    public func close() async {
        await self.client.close()
    }
}
