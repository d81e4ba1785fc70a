// The only file that imports libpq. Everything else in the module works with the Swift types below,
// so no C type reaches a public API and every libpq call and its return codes are in one place.
internal import CLibpq
import Logging

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Owns one `PGconn`.
///
/// Not thread-safe: ``PostgresConnection`` lets one operation at a time use it (its `phase`), and
/// that operation runs on one thread-pool thread. `PQfinish` in `deinit`.
final class LibpqConnection: @unchecked Sendable {
    private var conn: OpaquePointer?
    /// Receives the server's notices; must outlive `conn` (it is released after `PQfinish`).
    private let notices: NoticeLogger

    private init(takingOwnership conn: OpaquePointer, logger: Logger) {
        self.conn = conn
        self.notices = NoticeLogger(logger: logger)
        // Without a receiver libpq prints notices ("relation … already exists, skipping") to stderr.
        PQsetNoticeReceiver(conn, receiveNotice, Unmanaged.passUnretained(self.notices).toOpaque())
    }

    deinit {
        if let conn = self.conn {
            PQfinish(conn)
        }
    }

    /// Opens a connection with `PQconnectdbParams`. Blocks for up to `connect_timeout`.
    static func connect(parameters: [(String, String)], logger: Logger) throws(PostgresError) -> LibpqConnection {
        let conn = withCStringArrays(parameters.map(\.0), parameters.map(\.1)) { keywords, values in
            // Returns NULL only when libpq cannot allocate the PGconn; otherwise check PQstatus.
            PQconnectdbParams(keywords, values, 0)
        }
        guard let conn else {
            throw PostgresError(code: .connectionFailed, reason: "libpq could not allocate a connection")
        }
        guard PQstatus(conn) == CONNECTION_OK else {
            let message = Self.message(PQerrorMessage(conn))
            PQfinish(conn)
            throw PostgresError(code: .connectionFailed, reason: "could not connect", serverMessage: message)
        }
        // Text is decoded as UTF-8; the configuration asks for it, an `options` override could not.
        guard PQclientEncoding(conn) == pg_char_to_encoding("UTF8") else {
            PQfinish(conn)
            throw PostgresError(code: .invalidConfiguration, reason: "client_encoding must be UTF8")
        }
        return LibpqConnection(takingOwnership: conn, logger: logger)
    }

    /// Parses a `postgresql://` URL or a `key=value` conninfo string with libpq's own parser.
    static func parseConninfo(_ string: String) throws(PostgresError) -> [(String, String)] {
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(string, &errorMessage) else {
            let message = errorMessage.map { String(cString: $0) }
            if let errorMessage { PQfreemem(errorMessage) }
            // libpq's message may quote the string, which can hold a password: keep it out of `reason`.
            throw PostgresError(
                code: .invalidConfiguration,
                reason: "malformed connection string",
                serverMessage: message
            )
        }
        defer { PQconninfoFree(options) }
        var result: [(String, String)] = []
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val {
                result.append((String(cString: keyword), String(cString: value)))
            }
            option += 1
        }
        return result
    }

    private var handle: OpaquePointer {
        guard let conn = self.conn else { preconditionFailure("PGconn used after PQfinish") }
        return conn
    }

    /// Closes the socket and frees the PGconn; afterwards the connection reports itself bad.
    func finish() {
        if let conn = self.conn {
            PQfinish(conn)
            self.conn = nil
        }
    }

    var isBad: Bool {
        guard let conn = self.conn else { return true }
        return PQstatus(conn) == CONNECTION_BAD
    }

    var transactionStatus: TransactionStatus {
        guard let conn = self.conn else { return .unknown }
        switch PQtransactionStatus(conn) {
        case PQTRANS_IDLE: return .idle
        case PQTRANS_ACTIVE: return .active
        case PQTRANS_INTRANS: return .inTransaction
        case PQTRANS_INERROR: return .inError
        default: return .unknown
        }
    }

    var backendPID: Int32 { PQbackendPID(self.handle) }

    /// libpq's last error text (for logs: it can name hosts, never SQL or values).
    var errorMessage: String? {
        guard let conn = self.conn else { return nil }
        return Self.message(PQerrorMessage(conn))
    }

    /// A canceller for this connection's running statement, usable from any thread.
    func makeCanceller() -> LibpqCanceller? {
        // Returns NULL if the connection is not open.
        PQgetCancel(self.handle).map { LibpqCanceller(takingOwnership: $0) }
    }

    // MARK: Statements (blocking)

    func execParams(_ sql: String, _ bindings: PostgresBindings) -> LibpqResult? {
        bindings.withLibpqArrays { count, types, values, lengths, formats in
            // Returns NULL on out-of-memory or when the query could not be sent (connection lost).
            PQexecParams(self.handle, sql, count, types, values, lengths, formats, 1).map(LibpqResult.init)
        }
    }

    func prepare(name: String, sql: String, types: [UInt32]) -> LibpqResult? {
        PQprepare(self.handle, name, sql, Int32(types.count), types).map(LibpqResult.init)
    }

    func execPrepared(name: String, _ bindings: PostgresBindings) -> LibpqResult? {
        bindings.withLibpqArrays { count, _, values, lengths, formats in
            PQexecPrepared(self.handle, name, count, values, lengths, formats, 1).map(LibpqResult.init)
        }
    }

    /// Runs `sql` with the simple query protocol: several statements allowed, text results.
    /// Only for SQL from the repository (migration files), never with user data.
    func exec(_ sql: String) -> LibpqResult? {
        PQexec(self.handle, sql).map(LibpqResult.init)
    }

    /// Quotes an identifier with `PQescapeIdentifier` (nil for invalid encoding).
    func escapeIdentifier(_ identifier: String) -> String? {
        let utf8 = Array(identifier.utf8)
        let escaped = utf8.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { PQescapeIdentifier(self.handle, $0.baseAddress, $0.count) }
        }
        guard let escaped else { return nil }
        defer { PQfreemem(escaped) }
        return String(cString: escaped)
    }

    // MARK: Asynchronous input (notifications, idle checks)

    /// Reads whatever the server has sent without blocking (libpq keeps its socket non-blocking).
    /// - Returns: false when the connection is broken.
    func consumeInput() -> Bool {
        // Returns 1 on success, 0 on a connection problem (PQerrorMessage says which).
        PQconsumeInput(self.handle) == 1
    }

    /// Waits until the socket is readable or `timeoutMilliseconds` pass (0: just look).
    /// - Returns: whether there is something to read (EOF and errors included); false on timeout.
    func waitReadable(timeoutMilliseconds: Int32) -> Bool {
        Self.pollSocket(PQsocket(self.handle), events: Int16(POLLIN), timeoutMilliseconds: timeoutMilliseconds) != 0
    }

    /// Takes the notifications libpq has buffered.
    func takeNotifications() -> [PostgresNotification] {
        var notifications: [PostgresNotification] = []
        while let notify = PQnotifies(self.handle) {
            notifications.append(
                PostgresNotification(
                    channel: String(cString: notify.pointee.relname),
                    payload: String(cString: notify.pointee.extra),
                    backendPID: notify.pointee.be_pid
                )
            )
            PQfreemem(notify)
        }
        return notifications
    }

    // MARK: Pipeline mode (non-blocking socket I/O, see PostgresConnection+Pipeline.swift)

    func enterPipelineMode() -> Bool {
        // Returns 1 on success, 0 when the connection is not idle.
        PQenterPipelineMode(self.handle) == 1
    }

    func exitPipelineMode() -> Bool {
        guard let conn = self.conn else { return false }
        // Returns 1 on success, 0 when results are pending or the connection is busy.
        return PQexitPipelineMode(conn) == 1
    }

    func setNonBlocking(_ on: Bool) -> Bool {
        guard let conn = self.conn else { return false }
        // Returns 0 on success, -1 on error.
        return PQsetnonblocking(conn, on ? 1 : 0) == 0
    }

    func sendQueryParams(_ sql: String, _ bindings: PostgresBindings) -> Bool {
        bindings.withLibpqArrays { count, types, values, lengths, formats in
            // Returns 1 when queued, 0 on failure (PQerrorMessage).
            PQsendQueryParams(self.handle, sql, count, types, values, lengths, formats, 1) == 1
        }
    }

    /// Queues a `Parse` of `sql` as the prepared statement `name` (pipeline mode); its result is a result of its own.
    func sendPrepare(name: String, sql: String, types: [UInt32]) -> Bool {
        PQsendPrepare(self.handle, name, sql, Int32(types.count), types) == 1
    }

    func sendQueryPrepared(name: String, _ bindings: PostgresBindings) -> Bool {
        bindings.withLibpqArrays { count, _, values, lengths, formats in
            PQsendQueryPrepared(self.handle, name, count, values, lengths, formats, 1) == 1
        }
    }

    func pipelineSync() -> Bool {
        // Returns 1 on success, 0 on failure.
        PQpipelineSync(self.handle) == 1
    }

    enum FlushResult { case done, pending, failed }

    func flush() -> FlushResult {
        // Returns 0 when everything is sent, 1 when data remains (non-blocking mode), -1 on failure.
        switch PQflush(self.handle) {
        case 0: .done
        case 1: .pending
        default: .failed
        }
    }

    var isBusy: Bool { PQisBusy(self.handle) == 1 }

    /// An error for a call that failed on this connection: lost when libpq found the connection bad, else failed,
    /// with libpq's message.
    func lostOrFailed(_ reason: String) -> PostgresError {
        PostgresError(code: self.isBad ? .connectionLost : .queryFailed, reason: reason, serverMessage: self.errorMessage)
    }

    /// The connection's socket (`PQsocket`), -1 when there is none.
    var socket: Int32 { PQsocket(self.handle) }

    /// The next result, or nil at the end of the current statement's results. Only call when
    /// `!isBusy`, or it blocks.
    func getResult() -> LibpqResult? {
        PQgetResult(self.handle).map(LibpqResult.init)
    }

    /// Waits until the socket is readable, or writable too when `write` is set.
    /// - Returns: whether it is readable (false after a timeout or when only writable).
    func waitForIO(write: Bool, timeoutMilliseconds: Int32) -> Bool {
        let events = Int16(POLLIN) | (write ? Int16(POLLOUT) : 0)
        let revents = Self.pollSocket(PQsocket(self.handle), events: events, timeoutMilliseconds: timeoutMilliseconds)
        return revents & (Int16(POLLIN) | Int16(POLLERR) | Int16(POLLHUP)) != 0
    }

    // MARK: Helpers

    private static func pollSocket(_ fd: Int32, events: Int16, timeoutMilliseconds: Int32) -> Int16 {
        guard fd >= 0 else { return Int16(POLLERR) }
        var pfd = pollfd(fd: fd, events: events, revents: 0)
        // Returns the number of ready descriptors, 0 on timeout, -1 with errno (EINTR: as a timeout).
        let rc = poll(&pfd, 1, timeoutMilliseconds)
        return rc > 0 ? pfd.revents : 0
    }

    private static func message(_ pointer: UnsafeMutablePointer<CChar>?) -> String? {
        guard let pointer else { return nil }
        let text = String(cString: pointer).trimmingTrailingWhitespace()
        return text.isEmpty ? nil : text
    }
}

/// Logs the server's NOTICE/WARNING messages (they never abort a statement).
private final class NoticeLogger {
    let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }
}

/// libpq's notice receiver: recovers the NoticeLogger from `arg`.
private func receiveNotice(_ arg: UnsafeMutableRawPointer?, _ result: OpaquePointer?) {
    guard let arg, let result else { return }
    let notices = Unmanaged<NoticeLogger>.fromOpaque(arg).takeUnretainedValue()
    func field(_ code: Unicode.Scalar) -> String {
        PQresultErrorField(result, Int32(code.value)).map { String(cString: $0) } ?? "-"
    }
    let severity = field("V")
    // Notices can quote values, like error messages: debug level, where logs may hold detail.
    notices.logger.log(
        level: severity == "WARNING" ? .notice : .debug,
        "postgres notice",
        metadata: ["db.severity": "\(severity)", "db.sqlstate": "\(field("C"))", "db.message": "\(field("M"))"]
    )
}

enum TransactionStatus: Sendable {
    case idle, active, inTransaction, inError, unknown
}

/// Owns a `PGcancel`; `PQcancel` may be called from any thread while the connection is in use.
final class LibpqCanceller: @unchecked Sendable {
    private let cancel: OpaquePointer

    init(takingOwnership cancel: OpaquePointer) {
        self.cancel = cancel
    }

    deinit {
        PQfreeCancel(self.cancel)
    }

    /// Asks the server to cancel the running statement (blocks for a connection round trip).
    /// - Returns: whether the request was delivered (the statement may still finish first).
    @discardableResult
    func cancelRunningQuery() -> Bool {
        var buffer = [CChar](repeating: 0, count: 256)
        // Returns 1 when the cancel request was sent, 0 with a message in `buffer` otherwise.
        return PQcancel(self.cancel, &buffer, Int32(buffer.count)) == 1
    }
}

/// Owns one `PGresult` (`PQclear` in `deinit`).
///
/// A PGresult is read-only after creation; libpq documents that it may be read from any thread.
final class LibpqResult: @unchecked Sendable {
    private let result: OpaquePointer

    init(takingOwnership result: OpaquePointer) {
        self.result = result
    }

    deinit {
        PQclear(self.result)
    }

    enum Status: Sendable, Equatable {
        case emptyQuery, commandOK, tuplesOK, fatalError, pipelineSync, pipelineAborted, copy, other
    }

    var status: Status {
        switch PQresultStatus(self.result) {
        case PGRES_EMPTY_QUERY: .emptyQuery
        case PGRES_COMMAND_OK: .commandOK
        case PGRES_TUPLES_OK: .tuplesOK
        case PGRES_FATAL_ERROR, PGRES_BAD_RESPONSE, PGRES_NONFATAL_ERROR: .fatalError
        case PGRES_PIPELINE_SYNC: .pipelineSync
        case PGRES_PIPELINE_ABORTED: .pipelineAborted
        case PGRES_COPY_IN, PGRES_COPY_OUT, PGRES_COPY_BOTH: .copy
        default: .other
        }
    }

    var rowCount: Int { Int(PQntuples(self.result)) }
    var columnCount: Int { Int(PQnfields(self.result)) }

    func columnName(_ column: Int) -> String {
        // Returns NULL only for an out-of-range column, which callers check first.
        PQfname(self.result, Int32(column)).map { String(cString: $0) } ?? ""
    }

    /// The index of the column named exactly `name` (no case folding, unlike `PQfnumber`).
    func columnIndex(named name: String) -> Int? {
        name.withCString { name in
            (0..<self.columnCount).first { column in
                PQfname(self.result, Int32(column)).map { strcmp($0, name) == 0 } ?? false
            }
        }
    }

    func columnType(_ column: Int) -> PostgresDataType {
        PostgresDataType(rawValue: PQftype(self.result, Int32(column)))
    }

    func isBinary(_ column: Int) -> Bool { PQfformat(self.result, Int32(column)) == 1 }

    func isNull(row: Int, column: Int) -> Bool {
        PQgetisnull(self.result, Int32(row), Int32(column)) == 1
    }

    /// The value's bytes, valid while this object is alive.
    func withValue<T>(row: Int, column: Int, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        let length = Int(PQgetlength(self.result, Int32(row), Int32(column)))
        let value = PQgetvalue(self.result, Int32(row), Int32(column))
        return try withExtendedLifetime(self) {
            try body(UnsafeRawBufferPointer(start: value, count: length))
        }
    }

    /// Rows affected by INSERT/UPDATE/DELETE/MERGE/SELECT/MOVE/FETCH/COPY (0 for other commands).
    var affectedRows: Int {
        PQcmdTuples(self.result).flatMap { Int(String(cString: $0)) } ?? 0
    }

    /// The command tag, e.g. `INSERT 0 1` or `ROLLBACK`.
    var commandTag: String {
        PQcmdStatus(self.result).map { String(cString: $0) } ?? ""
    }

    /// The error fields the server sent (or libpq made up for a client-side failure).
    var errorFields: ServerErrorFields {
        ServerErrorFields(
            sqlState: self.field("C"),
            message: self.field("M") ?? self.resultMessage,
            detail: self.field("D"),
            table: self.field("t"),
            column: self.field("c"),
            constraint: self.field("n")
        )
    }

    private func field(_ code: Unicode.Scalar) -> String? {
        // Returns NULL when the field is absent or the result is not an error.
        PQresultErrorField(self.result, Int32(code.value)).map { String(cString: $0) }
    }

    private var resultMessage: String? {
        guard let message = PQresultErrorMessage(self.result) else { return nil }
        let text = String(cString: message).trimmingTrailingWhitespace()
        return text.isEmpty ? nil : text
    }
}

/// Error fields of a failed statement, see `PQresultErrorField`.
struct ServerErrorFields: Sendable {
    var sqlState: String?
    var message: String?
    var detail: String?
    var table: String?
    var column: String?
    var constraint: String?
}

extension PostgresBindings {
    /// Calls `body` with the arrays `PQexecParams` and friends take.
    fileprivate func withLibpqArrays<R>(
        _ body: (
            Int32, UnsafePointer<Oid>?, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?,
            UnsafePointer<Int32>?
        ) -> R
    ) -> R {
        if self.count == 0 {
            return body(0, nil, nil, nil, nil)
        }
        // A zero-length value still needs a non-NULL pointer: keep the storage non-empty.
        let storage = self.storage.isEmpty ? [0] : self.storage
        return storage.withUnsafeBytes { bytes in
            let base = bytes.baseAddress!
            let values = self.offsets.map { offset -> UnsafePointer<CChar>? in
                offset < 0 ? nil : (base + offset).assumingMemoryBound(to: CChar.self)
            }
            return self.types.withUnsafeBufferPointer { types in
                values.withUnsafeBufferPointer { values in
                    self.lengths.withUnsafeBufferPointer { lengths in
                        self.formats.withUnsafeBufferPointer { formats in
                            body(
                                Int32(self.count),
                                types.baseAddress,
                                values.baseAddress,
                                lengths.baseAddress,
                                formats.baseAddress
                            )
                        }
                    }
                }
            }
        }
    }
}

private func withCStringArrays<R>(
    _ first: [String],
    _ second: [String],
    _ body: (UnsafePointer<UnsafePointer<CChar>?>, UnsafePointer<UnsafePointer<CChar>?>) -> R
) -> R {
    // NULL-terminated arrays of strdup'ed strings, freed afterwards.
    let a = first.map { UnsafePointer(strdup($0)) } + [nil]
    let b = second.map { UnsafePointer(strdup($0)) } + [nil]
    defer {
        for pointer in a + b { free(UnsafeMutablePointer(mutating: pointer)) }
    }
    return a.withUnsafeBufferPointer { a in b.withUnsafeBufferPointer { b in body(a.baseAddress!, b.baseAddress!) } }
}

extension String {
    func trimmingTrailingWhitespace() -> String {
        var text = Substring(self)
        while let last = text.last, last == "\n" || last == " " || last == "\r" || last == "\t" {
            text.removeLast()
        }
        return String(text)
    }
}
