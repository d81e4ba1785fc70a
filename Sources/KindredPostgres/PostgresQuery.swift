/// One SQL statement and its bind parameters.
///
/// Write it as a string literal: every interpolated value becomes a `$n` parameter, never SQL text.
///
/// ```swift
/// let rows = try await client.query("SELECT name FROM users WHERE id = \(id) AND community = \(community)")
/// // SELECT name FROM users WHERE id = $1 AND community = $2, with id and community bound
/// ```
///
/// Identifiers known in code (a schema name from configuration, never user data) can be spliced with
/// `\(identifier: name)` (quoted) or, as a last resort, `\(unescaped: sql)` (verbatim).
public struct PostgresQuery: Sendable, Hashable, CustomStringConvertible {
    /// The SQL text with `$1`, `$2`, … placeholders.
    public var sql: String
    public var bindings: PostgresBindings

    /// A statement from SQL text and separately built bindings. The text must not contain data.
    public init(unsafeSQL sql: String, bindings: PostgresBindings = PostgresBindings()) {
        self.sql = sql
        self.bindings = bindings
    }

    /// The SQL text and the parameter count, never the values (safe for debug logs).
    public var description: String {
        "\(self.sql) [\(self.bindings.count) parameter\(self.bindings.count == 1 ? "" : "s")]"
    }
}

extension PostgresQuery: ExpressibleByStringInterpolation {
    public init(stringLiteral value: String) {
        self.init(unsafeSQL: value)
    }

    public init(stringInterpolation: StringInterpolation) {
        self.init(unsafeSQL: stringInterpolation.sql, bindings: stringInterpolation.bindings)
    }

    public struct StringInterpolation: StringInterpolationProtocol, Sendable {
        var sql: String
        var bindings: PostgresBindings

        public init(literalCapacity: Int, interpolationCount: Int) {
            self.sql = ""
            self.sql.reserveCapacity(literalCapacity + 3 * interpolationCount)
            self.bindings = PostgresBindings(capacity: interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) {
            self.sql += literal
        }

        /// Binds `value` as the next `$n` parameter.
        public mutating func appendInterpolation(_ value: some PostgresEncodable) {
            self.bindings.append(value)
            self.appendPlaceholder()
        }

        /// Binds `value` as the next `$n` parameter; `nil` is NULL.
        public mutating func appendInterpolation<Value: PostgresEncodable>(_ value: Value?) {
            self.bindings.append(value)
            self.appendPlaceholder()
        }

        /// Splices an identifier known in code (a schema or table name, never user data), quoted
        /// as PostgreSQL requires: `"` doubled, the whole wrapped in `"`.
        public mutating func appendInterpolation(identifier: String) {
            self.sql += quoteIdentifier(identifier)
        }

        /// Splices SQL text verbatim. Only for fragments written in code, never for data.
        public mutating func appendInterpolation(unescaped sql: String) {
            self.sql += sql
        }

        private mutating func appendPlaceholder() {
            self.sql += "$"
            self.sql += String(self.bindings.count)
        }
    }
}

/// Quotes an SQL identifier. With `standard_conforming_strings` (always on since 9.1) and UTF-8,
/// doubling `"` is all `PQescapeIdentifier` does too; an identifier cannot contain NUL.
func quoteIdentifier(_ identifier: String) -> String {
    precondition(!identifier.utf8.contains(0), "an SQL identifier cannot contain NUL")
    var quoted = "\""
    for character in identifier {
        quoted.append(character)
        if character == "\"" { quoted.append("\"") }
    }
    quoted.append("\"")
    return quoted
}

/// Bind parameters in the layout libpq takes: types, one byte buffer, offsets, lengths, formats.
public struct PostgresBindings: Sendable, Hashable {
    /// The number of parameters.
    public private(set) var count: Int = 0
    var storage: [UInt8] = []
    /// Offsets into `storage`, -1 for NULL.
    var offsets: [Int] = []
    var types: [UInt32] = []
    var lengths: [Int32] = []
    var formats: [Int32] = []
    /// Why a value could not be encoded (fixed text naming the type, never the value). Thrown when
    /// the statement runs, so that building a query never throws.
    var encodingFailure: String?

    public init() {}

    public init(capacity: Int) {
        self.offsets.reserveCapacity(capacity)
        self.types.reserveCapacity(capacity)
        self.lengths.reserveCapacity(capacity)
        self.formats.reserveCapacity(capacity)
    }

    /// The declared parameter types (part of the key of a cached prepared statement).
    var parameterTypes: [UInt32] { self.types }

    public mutating func append<Value: PostgresEncodable>(_ value: Value) {
        let start = self.storage.count
        do {
            try value.encode(into: &self.storage)
        } catch {
            self.storage.removeSubrange(start...)
            self.encodingFailure =
                self.encodingFailure ?? "parameter \(self.count + 1) (\(Value.self)) cannot be encoded"
        }
        let length = self.storage.count - start
        if Value.postgresFormat == .text {
            // libpq reads text parameters as C strings: an embedded NUL would cut the value short.
            if self.storage[start...].contains(0) {
                self.encodingFailure =
                    self.encodingFailure ?? "parameter \(self.count + 1) (\(Value.self)) contains a NUL character"
            }
            self.storage.append(0)
        }
        self.offsets.append(start)
        self.types.append(Value.postgresDataType.rawValue)
        self.lengths.append(Int32(clamping: length))
        self.formats.append(Value.postgresFormat.rawValue)
        self.count += 1
    }

    public mutating func append<Value: PostgresEncodable>(_ value: Value?) {
        switch value {
        case .some(let value): self.append(value)
        case .none: self.appendNull(type: Value.postgresDataType)
        }
    }

    public mutating func appendNull(type: PostgresDataType = .unspecified) {
        self.offsets.append(-1)
        self.types.append(type.rawValue)
        self.lengths.append(0)
        self.formats.append(PostgresFormat.binary.rawValue)
        self.count += 1
    }

    /// Throws ``PostgresError/Code/invalidParameter`` when a value could not be encoded.
    func validate() throws(PostgresError) {
        if let encodingFailure {
            throw PostgresError(code: .invalidParameter, reason: encodingFailure)
        }
    }
}
