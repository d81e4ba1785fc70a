/// An error from the database layer.
///
/// `description` holds only what is safe to show anywhere: the code, the SQLSTATE, schema object
/// names (constraint, table, column) and a fixed reason. It never contains SQL text or parameter
/// values. The server's own message and detail, which can quote values (`Key (email)=(…) already
/// exists`), are kept in ``serverMessage`` and ``serverDetail`` for logs.
public struct PostgresError: Error, CustomStringConvertible, Sendable {
    /// What went wrong; a struct around a private enum so that codes can be added.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: Sendable, Hashable {
            case connectionFailed, connectionLost, connectionBusy, invalidConfiguration
            case queryFailed, invalidParameter, decodingFailed, cancelled
            case uniqueViolation, foreignKeyViolation, notNullViolation, checkViolation, exclusionViolation
            case serializationFailure, deadlock, lockTimeout, statementTimeout
            case poolTimeout, poolShutdown, migrationFailed
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A connection could not be opened (server down, refused, authentication failed, timeout).
        public static let connectionFailed = Code(.connectionFailed)
        /// The connection broke while in use; the statement may or may not have been executed.
        public static let connectionLost = Code(.connectionLost)
        /// Two tasks used one connection at the same time (a programming error).
        public static let connectionBusy = Code(.connectionBusy)
        /// The connection string or configuration is malformed.
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// The server rejected the statement (see ``PostgresError/sqlState``).
        public static let queryFailed = Code(.queryFailed)
        /// A bind parameter cannot be sent (e.g. a string with a NUL character).
        public static let invalidParameter = Code(.invalidParameter)
        /// A column value cannot be decoded as the requested Swift type, or is NULL.
        public static let decodingFailed = Code(.decodingFailed)
        /// The calling task was cancelled; a running statement was cancelled on the server.
        public static let cancelled = Code(.cancelled)
        /// SQLSTATE 23505.
        public static let uniqueViolation = Code(.uniqueViolation)
        /// SQLSTATE 23503.
        public static let foreignKeyViolation = Code(.foreignKeyViolation)
        /// SQLSTATE 23502.
        public static let notNullViolation = Code(.notNullViolation)
        /// SQLSTATE 23514.
        public static let checkViolation = Code(.checkViolation)
        /// SQLSTATE 23P01.
        public static let exclusionViolation = Code(.exclusionViolation)
        /// SQLSTATE 40001: run the whole transaction again.
        public static let serializationFailure = Code(.serializationFailure)
        /// SQLSTATE 40P01: run the whole transaction again.
        public static let deadlock = Code(.deadlock)
        /// SQLSTATE 55P03 (`lock_timeout` or `NOWAIT`).
        public static let lockTimeout = Code(.lockTimeout)
        /// SQLSTATE 57014 caused by `statement_timeout`.
        public static let statementTimeout = Code(.statementTimeout)
        /// No connection became free within the pool's acquire timeout.
        public static let poolTimeout = Code(.poolTimeout)
        /// The client has been shut down.
        public static let poolShutdown = Code(.poolShutdown)
        /// A migration could not be applied, or the recorded migrations do not match the files.
        public static let migrationFailed = Code(.migrationFailed)

        public var description: String {
            switch self.base {
            case .connectionFailed: "connectionFailed"
            case .connectionLost: "connectionLost"
            case .connectionBusy: "connectionBusy"
            case .invalidConfiguration: "invalidConfiguration"
            case .queryFailed: "queryFailed"
            case .invalidParameter: "invalidParameter"
            case .decodingFailed: "decodingFailed"
            case .cancelled: "cancelled"
            case .uniqueViolation: "uniqueViolation"
            case .foreignKeyViolation: "foreignKeyViolation"
            case .notNullViolation: "notNullViolation"
            case .checkViolation: "checkViolation"
            case .exclusionViolation: "exclusionViolation"
            case .serializationFailure: "serializationFailure"
            case .deadlock: "deadlock"
            case .lockTimeout: "lockTimeout"
            case .statementTimeout: "statementTimeout"
            case .poolTimeout: "poolTimeout"
            case .poolShutdown: "poolShutdown"
            case .migrationFailed: "migrationFailed"
            }
        }
    }

    public var code: Code
    /// A fixed explanation without SQL or values.
    public var reason: String
    /// The five-character SQLSTATE when the server reported the error.
    public var sqlState: String?
    /// The violated constraint, for integrity errors.
    public var constraint: String?
    /// The table the error is about, when the server names one.
    public var table: String?
    /// The column the error is about (named by the server, or the column being decoded).
    public var column: String?
    /// The server's (or libpq's) message. May quote values: for logs, not for clients.
    public var serverMessage: String?
    /// The server's detail line. May quote values: for logs, not for clients.
    public var serverDetail: String?

    public init(
        code: Code,
        reason: String,
        sqlState: String? = nil,
        constraint: String? = nil,
        table: String? = nil,
        column: String? = nil,
        serverMessage: String? = nil,
        serverDetail: String? = nil
    ) {
        self.code = code
        self.reason = reason
        self.sqlState = sqlState
        self.constraint = constraint
        self.table = table
        self.column = column
        self.serverMessage = serverMessage
        self.serverDetail = serverDetail
    }

    /// Whether running the same work again may succeed: transient connection trouble, a busy pool,
    /// or a transaction conflict (serialization failure, deadlock, lock timeout). After
    /// ``Code/connectionLost`` a write may have been committed: retry only idempotent work.
    public var isRetryable: Bool {
        switch self.code {
        case .connectionFailed, .connectionLost, .poolTimeout, .serializationFailure, .deadlock, .lockTimeout:
            true
        default:
            false
        }
    }

    /// Whether a transaction that failed with this error should be run again from BEGIN: a serialization
    /// failure (40001) or a deadlock (40P01) rolled it back.
    public var isTransactionConflict: Bool {
        self.code == .serializationFailure || self.code == .deadlock
    }

    public var description: String {
        var text = "PostgresError(\(self.code)"
        if let sqlState { text += ", sqlstate \(sqlState)" }
        if let table { text += ", table \(table)" }
        if let column { text += ", column \(column)" }
        if let constraint { text += ", constraint \(constraint)" }
        return text + ": \(self.reason))"
    }
}

extension PostgresError {
    /// Maps a failed statement's error fields to a code.
    /// - Parameters:
    ///   - connectionBroken: whether the connection is unusable afterwards.
    ///   - cancelRequested: whether we cancelled the statement (57014 is then not a timeout).
    init(server fields: ServerErrorFields, connectionBroken: Bool, cancelRequested: Bool) {
        let sqlState = fields.sqlState
        let code: Code
        let reason: String
        switch sqlState {
        case _ where connectionBroken:
            (code, reason) = (.connectionLost, "the connection to the server was lost")
        case let state? where state.hasPrefix("08") || state == "57P01" || state == "57P02" || state == "57P03":
            (code, reason) = (.connectionLost, "the server closed the connection")
        case "25P03":
            (code, reason) = (.connectionLost, "idle_in_transaction_session_timeout ended the session")
        case "23505": (code, reason) = (.uniqueViolation, "duplicate key value violates a unique constraint")
        case "23503": (code, reason) = (.foreignKeyViolation, "foreign key violation")
        case "23502": (code, reason) = (.notNullViolation, "null value violates a not-null constraint")
        case "23514": (code, reason) = (.checkViolation, "check constraint violation")
        case "23P01": (code, reason) = (.exclusionViolation, "exclusion constraint violation")
        case "40001": (code, reason) = (.serializationFailure, "could not serialize access")
        case "40P01": (code, reason) = (.deadlock, "deadlock detected")
        case "55P03": (code, reason) = (.lockTimeout, "could not obtain a lock in time")
        case "57014" where cancelRequested: (code, reason) = (.cancelled, "the statement was cancelled")
        case "57014": (code, reason) = (.statementTimeout, "the statement was cancelled by a timeout")
        case nil: (code, reason) = (.queryFailed, "the statement failed without an SQLSTATE")
        default: (code, reason) = (.queryFailed, "the server rejected the statement")
        }
        self.init(
            code: code,
            reason: reason,
            sqlState: sqlState,
            constraint: fields.constraint,
            table: fields.table,
            column: fields.column,
            serverMessage: fields.message,
            serverDetail: fields.detail
        )
    }

    static func decoding(_ reason: String) -> PostgresError {
        PostgresError(code: .decodingFailed, reason: reason)
    }
}
