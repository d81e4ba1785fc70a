/// How to reach the server and how each session is set up.
///
/// Built from a URL (`postgresql://user:password@host:5432/db?sslmode=require`, or
/// `postgresql://user@/db?host=/socket/dir` for a unix socket) or a `key=value` conninfo string,
/// both parsed by libpq. The fields below are added as libpq parameters when connecting:
///
/// | field | libpq parameter / server setting | default |
/// |---|---|---|
/// | ``connectTimeout`` | `connect_timeout` (whole seconds, rounded up) | 5 s |
/// | ``keepalives`` | `keepalives`, `keepalives_idle`/`_interval`/`_count` | on, 30 s / 10 s / 3 |
/// | ``applicationName`` | `application_name` | `kindred` |
/// | ``statementTimeout`` | `-c statement_timeout` via `options` | 5 s |
/// | ``lockTimeout`` | `-c lock_timeout` | 2 s |
/// | ``idleInTransactionSessionTimeout`` | `-c idle_in_transaction_session_timeout` | 30 s |
/// | ``genericPlans`` | `-c plan_cache_mode=force_generic_plan` | on |
/// | ``settings`` | further `-c name=value` (e.g. `search_path`) | none |
///
/// Generic plans: every statement is prepared once per connection (``preparedStatementCacheSize``), and PostgreSQL
/// then plans it once, without its parameter values, instead of choosing per execution between that plan and one
/// made for the values. Its choice favoured planning anew at every call for statements over array parameters (the
/// batch writes and reads, an `unnest` of ids): a ten-table read planned in 7.8 ms to run in 1.4 ms. A statement
/// whose generic plan is poor is written so that it is not (an index condition the planner can see without values).
///
/// `client_encoding` is always UTF8. `synchronous_commit` is left at the server's default (on), so
/// an acknowledged commit survives a crash. An `options` value in the URL is appended after ours and
/// so overrides these settings (deployment configuration wins over code defaults).
public struct PostgresConfiguration: Sendable, CustomStringConvertible {
    /// TCP keepalive probes, so a dead peer is noticed even when no query is running.
    public struct Keepalives: Sendable, Hashable {
        public var idle: Duration
        public var interval: Duration
        public var count: Int

        public init(idle: Duration = .seconds(30), interval: Duration = .seconds(10), count: Int = 3) {
            self.idle = idle
            self.interval = interval
            self.count = count
        }
    }

    /// Parameters from the URL or conninfo string, in libpq's keyword form (`host`, `dbname`, …).
    public var parameters: [String: String]
    public var connectTimeout: Duration = .seconds(5)
    public var keepalives: Keepalives? = Keepalives()
    public var applicationName: String = "kindred"
    public var statementTimeout: Duration? = .seconds(5)
    public var lockTimeout: Duration? = .seconds(2)
    public var idleInTransactionSessionTimeout: Duration? = .seconds(30)
    /// Statements planned once per connection, not per execution (see above); off leaves PostgreSQL's `auto`.
    public var genericPlans = true
    /// Further session settings sent as `-c name=value`.
    public var settings: [String: String] = [:]
    /// Prepared statements kept per connection, keyed by SQL text and parameter types (0: none).
    public var preparedStatementCacheSize: Int = 256

    /// Parses a `postgresql://` URL or a `key=value` conninfo string.
    public init(_ connectionString: String) throws(PostgresError) {
        self.parameters = Dictionary(
            try LibpqConnection.parseConninfo(connectionString),
            uniquingKeysWith: { _, last in last }
        )
    }

    /// A TCP or unix-socket (`host` starting with `/`) configuration.
    public init(host: String, port: Int = 5432, user: String, password: String? = nil, database: String) {
        self.parameters = ["host": host, "port": String(port), "user": user, "dbname": database]
        if let password { self.parameters["password"] = password }
    }

    /// The database name (`dbname`).
    public var database: String? {
        get { self.parameters["dbname"] }
        set { self.parameters["dbname"] = newValue }
    }

    /// The parameters handed to `PQconnectdbParams`.
    var libpqParameters: [(String, String)] {
        var result = self.parameters.filter { $0.key != "options" }.sorted { $0.key < $1.key }
        func set(_ key: String, _ value: String) {
            result.removeAll { $0.0 == key }
            result.append((key, value))
        }
        set("client_encoding", "UTF8")
        set("connect_timeout", String(max(2, Self.wholeSecondsRoundedUp(self.connectTimeout))))
        if let keepalives {
            set("keepalives", "1")
            set("keepalives_idle", String(max(1, Self.wholeSecondsRoundedUp(keepalives.idle))))
            set("keepalives_interval", String(max(1, Self.wholeSecondsRoundedUp(keepalives.interval))))
            set("keepalives_count", String(keepalives.count))
        } else {
            set("keepalives", "0")
        }
        if self.parameters["application_name"] == nil {
            set("application_name", self.applicationName)
        }
        var options: [String] = []
        func setting(_ name: String, _ value: String) {
            options.append("-c \(Self.escapeOption(name))=\(Self.escapeOption(value))")
        }
        if let statementTimeout { setting("statement_timeout", Self.milliseconds(statementTimeout)) }
        if let lockTimeout { setting("lock_timeout", Self.milliseconds(lockTimeout)) }
        if let idleInTransactionSessionTimeout {
            setting("idle_in_transaction_session_timeout", Self.milliseconds(idleInTransactionSessionTimeout))
        }
        if self.genericPlans { setting("plan_cache_mode", "force_generic_plan") }
        for (name, value) in self.settings.sorted(by: { $0.key < $1.key }) { setting(name, value) }
        if let userOptions = self.parameters["options"] { options.append(userOptions) }
        if !options.isEmpty { set("options", options.joined(separator: " ")) }
        return result
    }

    /// The parameters with the password hidden.
    public var description: String {
        let shown = self.parameters.sorted { $0.key < $1.key }.map { key, value in
            "\(key)=\(key == "password" ? "********" : value)"
        }
        return "PostgresConfiguration(\(shown.joined(separator: " ")))"
    }

    private static func wholeSecondsRoundedUp(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return attoseconds > 0 ? seconds + 1 : seconds
    }

    private static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return String(seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }

    /// In `options`, spaces and backslashes inside a value are escaped with a backslash.
    private static func escapeOption(_ text: String) -> String {
        var escaped = ""
        for character in text {
            if character == " " || character == "\\" { escaped.append("\\") }
            escaped.append(character)
        }
        return escaped
    }
}
