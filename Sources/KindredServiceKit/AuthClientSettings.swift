import KindredGRPCServices

/// How a service reaches auth, read the same way by every service under its own prefix: auth's public keys,
/// its session ends (WatchRevokedSessions) and the service's own token (IssueServiceToken).
public struct AuthClientSettings: Sendable, Equatable {
    /// `KINDRED_<SERVER>_AUTH_ADDRESS` (host:port, or its replicas separated by commas), default `127.0.0.1:50051`.
    public var address = ServiceAddress(host: "127.0.0.1", port: 50051)
    /// `KINDRED_<SERVER>_SERVICE_SECRET` (string, 32..256, or `..._FILE`), default none: the service's secret for
    /// auth's IssueServiceToken (auth's `KINDRED_AUTH_SERVICE_SECRET_<SERVER>`). Without it session ends cannot be
    /// followed (calls with a user token answer UNAVAILABLE: fail closed) and no events are delivered.
    public var serviceSecret: String?
    /// `KINDRED_<SERVER>_REVOCATION_STALE_MS` (int, 2000..60000), default 5000: how long the set of ended
    /// sessions is trusted without news from auth.
    public var revocationStaleAfter: Duration = .seconds(5)

    public init() {}

    public init(server: String, environment: EnvironmentReader) throws {
        let prefix = "KINDRED_\(server.uppercased())_"
        self.address = try environment.serviceAddress(prefix + "AUTH_ADDRESS", default: self.address)
        self.serviceSecret = try environment.secret(prefix + "SERVICE_SECRET", length: 32...256)
        self.revocationStaleAfter = try Self.revocationStaleAfter(server: server, environment: environment)
    }

    /// `KINDRED_<SERVER>_REVOCATION_STALE_MS` alone (auth reads it for its own set of ended sessions).
    public static func revocationStaleAfter(server: String, environment: EnvironmentReader) throws -> Duration {
        try environment.milliseconds(
            "KINDRED_\(server.uppercased())_REVOCATION_STALE_MS", default: .seconds(5), in: 2000...60_000)
    }
}
