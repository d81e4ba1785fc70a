/// The limits of one plain HTTP/1.1 port (the admin port of every server, the gateway's media port), so that a
/// client that opens connections and sends a request slowly, or not at all, cannot hold the process's file
/// descriptors (which its gRPC port shares): every phase of a connection has a deadline, and the number of open
/// connections has a cap. See `HTTP1ConnectionTimer` for when each deadline runs.
public struct HTTP1Limits: Sendable, Hashable {
    /// `<PREFIX>HEADER_TIMEOUT_MS` (int, 100..300000), default 10000: a request's header must be complete this
    /// long after its first byte, or after the connection opened for its first request; else the connection is
    /// closed (a silent new connection counts as a slow header).
    public var headerTimeout: Duration = .seconds(10)
    /// `<PREFIX>BODY_TIMEOUT_MS` (int, 100..300000), default 30000: a request's body (if any) must be complete
    /// this long after its header.
    public var bodyTimeout: Duration = .seconds(30)
    /// `<PREFIX>IDLE_TIMEOUT_MS` (int, 100..3600000), default 60000: a kept-alive connection with no byte of a next
    /// request this long after its last response was handed to the socket is closed (this also closes a client
    /// that does not read its response: the port stops reading while its output is blocked).
    public var idleTimeout: Duration = .seconds(60)
    /// `<PREFIX>MAX_CONNECTIONS` (int, 1..100000): connections open at once; more are closed as they are accepted.
    public var maxConnections: Int

    public init(maxConnections: Int) {
        self.maxConnections = maxConnections
    }

    /// Reads `<prefix>HEADER_TIMEOUT_MS`, `<prefix>BODY_TIMEOUT_MS`, `<prefix>IDLE_TIMEOUT_MS` and
    /// `<prefix>MAX_CONNECTIONS` (e.g. `KINDRED_GATEWAY_MEDIA_`), starting from `defaults`.
    public init(prefix: String, defaults: HTTP1Limits, environment: EnvironmentReader) throws {
        self = defaults
        self.headerTimeout = try environment.milliseconds(
            prefix + "HEADER_TIMEOUT_MS",
            default: self.headerTimeout,
            in: 100...300_000
        )
        self.bodyTimeout = try environment.milliseconds(
            prefix + "BODY_TIMEOUT_MS",
            default: self.bodyTimeout,
            in: 100...300_000
        )
        self.idleTimeout = try environment.milliseconds(
            prefix + "IDLE_TIMEOUT_MS",
            default: self.idleTimeout,
            in: 100...3_600_000
        )
        self.maxConnections = try environment.int(
            prefix + "MAX_CONNECTIONS",
            default: self.maxConnections,
            in: 1...100_000
        )
    }

    /// The admin port's defaults: operators and scrapers need few connections (64).
    public static let admin = HTTP1Limits(maxConnections: 64)
}
