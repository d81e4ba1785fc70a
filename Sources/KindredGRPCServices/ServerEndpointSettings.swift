import KindredGRPC
import KindredOpenSSL

/// The settings every server reads the same way under its own prefix (`KINDRED_AUTH_`, `KINDRED_GATEWAY_`...):
/// where it listens, its admin port, TLS, the access log and the abuse penalty by address. `healthcheck` needs only these.
public struct ServerEndpointSettings: Sendable, Equatable {
    /// `KINDRED_<SERVER>_LISTEN` (host:port; IPv6 in brackets), default `127.0.0.1:<the server's port>`.
    public var listen: HostPort
    /// `KINDRED_<SERVER>_ADMIN_LISTEN` (host:port, or `off`), default `127.0.0.1:<port + 100>`: Prometheus text at
    /// `/metrics`, `/healthz`.
    public var adminListen: HostPort?
    /// `KINDRED_<SERVER>_ADMIN_HEADER_TIMEOUT_MS`, `_ADMIN_BODY_TIMEOUT_MS`, `_ADMIN_IDLE_TIMEOUT_MS`,
    /// `_ADMIN_MAX_CONNECTIONS` (see `HTTP1Limits`), default 10 s, 30 s, 60 s and 64 connections.
    public var adminLimits = HTTP1Limits.admin
    /// `KINDRED_<SERVER>_TLS_CERT_FILE` / `KINDRED_<SERVER>_TLS_KEY_FILE` (PEM paths), default none: TLS with ALPN
    /// h2 when both are set, h2c otherwise.
    public var tlsCertificateFile: String?
    public var tlsKeyFile: String?
    /// `KINDRED_<SERVER>_ACCESS_LOG` (bool), default true: one info line per finished call.
    public var accessLog = true
    /// `KINDRED_<SERVER>_ABUSE_PENALTY_BY_ADDRESS` (bool), default false: when true, an address whose connection
    /// was closed for abuse has its new connections held, then refused, for a growing penalty
    /// (`GRPCServerConfiguration.abusePenalty`). Off by default because clients behind one NAT or L4 load balancer
    /// share an address: the abusive connection is cut either way, and only the operator knows whether
    /// addresses are shared.
    public var abusePenaltyByAddress = false

    /// The defaults of a server whose gRPC port is `port`.
    public init(defaultPort port: Int) {
        self.listen = HostPort(host: "127.0.0.1", port: port)
        self.adminListen = HostPort(host: "127.0.0.1", port: port + 100)
    }

    /// Reads `<prefix>LISTEN`, `<prefix>ADMIN_LISTEN`, `<prefix>TLS_CERT_FILE`, `<prefix>TLS_KEY_FILE`,
    /// `<prefix>ACCESS_LOG` and `<prefix>ABUSE_PENALTY_BY_ADDRESS`, e.g. with `prefix` `KINDRED_AUTH_`.
    public init(prefix: String, defaultPort port: Int, environment: EnvironmentReader) throws {
        self.init(defaultPort: port)
        self.listen = try environment.address(prefix + "LISTEN", default: self.listen)
        self.adminListen = try environment.optionalAddress(prefix + "ADMIN_LISTEN", default: self.adminListen)
        self.adminLimits = try HTTP1Limits(prefix: prefix + "ADMIN_", defaults: self.adminLimits, environment: environment)
        self.tlsCertificateFile = environment.string(prefix + "TLS_CERT_FILE")
        self.tlsKeyFile = environment.string(prefix + "TLS_KEY_FILE")
        guard (self.tlsCertificateFile == nil) == (self.tlsKeyFile == nil) else {
            throw ConfigurationError(
                key: prefix + "TLS_CERT_FILE",
                problem: "and \(prefix)TLS_KEY_FILE must be set together"
            )
        }
        self.accessLog = try environment.bool(prefix + "ACCESS_LOG", default: self.accessLog)
        self.abusePenaltyByAddress = try environment.bool(
            prefix + "ABUSE_PENALTY_BY_ADDRESS",
            default: self.abusePenaltyByAddress
        )
    }

    /// The gRPC server configuration these settings describe (loads the TLS files when set).
    public func serverConfiguration() throws -> GRPCServerConfiguration {
        var server = GRPCServerConfiguration()
        server.host = self.listen.host
        server.port = self.listen.port
        server.accessLogLevel = self.accessLog ? .info : nil
        server.abusePenalty = self.abusePenaltyByAddress ? PenaltyBox.Configuration() : nil
        if let certificate = self.tlsCertificateFile, let key = self.tlsKeyFile {
            server.tls = try TLSContext(configuration: .server(certificateChainFile: certificate, privateKeyFile: key))
        }
        return server
    }

    /// The admin port's configuration, nil when off.
    public var adminConfiguration: AdminServer.Configuration? {
        self.adminListen.map { AdminServer.Configuration(host: $0.host, port: $0.port, limits: self.adminLimits) }
    }

    /// Whether the server listening here answers SERVING on its health service (what `healthcheck` asks).
    public func probe() async throws -> Bool {
        let tls = try self.tlsCertificateFile.map { try HealthProbe.tls(trusting: $0) }
        return await HealthProbe.isServing(self.listen, tls: tls)
    }
}
