/// The result of one statement: its rows (possibly none), the affected-row count and the command tag.
///
/// It keeps libpq's result alive and decodes values on access; nothing is copied up front.
public struct PostgresRows: Sendable, RandomAccessCollection {
    let result: LibpqResult

    init(_ result: LibpqResult) {
        self.result = result
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { self.result.rowCount }

    public subscript(position: Int) -> PostgresRow {
        precondition(position >= 0 && position < self.endIndex, "row index out of range")
        return PostgresRow(result: self.result, index: position)
    }

    public var columnNames: [String] {
        (0..<self.result.columnCount).map(self.result.columnName)
    }

    /// Rows inserted, updated, deleted, selected, … (0 for commands without a count).
    public var affectedRows: Int { self.result.affectedRows }

    /// The command tag, e.g. `INSERT 0 1`.
    public var commandTag: String { self.result.commandTag }
}

/// One row of a result. Decode columns by position or name:
///
/// ```swift
/// let id = try row.decode(Int64.self, at: 0)
/// let name = try row.decode(String?.self, column: "name")
/// let (id, name) = try row.decode((Int64, String).self)
/// ```
public struct PostgresRow: Sendable {
    let result: LibpqResult
    /// The row's position in its result.
    public let index: Int

    public var columnCount: Int { self.result.columnCount }

    public func columnName(at column: Int) -> String {
        precondition(column >= 0 && column < self.columnCount, "column index out of range")
        return self.result.columnName(column)
    }

    public func isNull(at column: Int) -> Bool {
        precondition(column >= 0 && column < self.columnCount, "column index out of range")
        return self.result.isNull(row: self.index, column: column)
    }

    /// Decodes the value at `column`. NULL decodes only as an Optional.
    public func decode<T: PostgresDecodable>(_: T.Type = T.self, at column: Int) throws(PostgresError) -> T {
        guard column >= 0 && column < self.columnCount else {
            throw PostgresError.decoding("column \(column) does not exist; the row has \(self.columnCount)")
        }
        let type = self.result.columnType(column)
        do {
            if self.result.isNull(row: self.index, column: column) {
                return try T.postgresNull()
            }
            guard self.result.isBinary(column) else {
                throw PostgresError.decoding("the column is in text format")
            }
            return try self.result.withValue(row: self.index, column: column) { bytes in
                try T(postgresBytes: bytes, type: type)
            }
        } catch var error as PostgresError {
            error.column = error.column ?? self.result.columnName(column)
            throw error
        } catch {
            // A custom decoder's own error: keep only its type name, which cannot quote the value.
            var failure = PostgresError.decoding("\(T.self) decoder failed with \(Swift.type(of: error))")
            failure.column = self.result.columnName(column)
            throw failure
        }
    }

    /// Decodes the value in the column named exactly `name`.
    public func decode<T: PostgresDecodable>(_: T.Type = T.self, column name: String) throws(PostgresError) -> T {
        guard let column = self.result.columnIndex(named: name) else {
            var error = PostgresError.decoding("no such column")
            error.column = name
            throw error
        }
        return try self.decode(T.self, at: column)
    }

    /// `row[“name”, as: String.self]`: the value in the column named `name`.
    public subscript<T: PostgresDecodable>(name: String, as type: T.Type = T.self) -> T {
        get throws(PostgresError) { try self.decode(type, column: name) }
    }

    /// `row[0, as: Int64.self]`: the value at `column`.
    public subscript<T: PostgresDecodable>(column: Int, as type: T.Type = T.self) -> T {
        get throws(PostgresError) { try self.decode(type, at: column) }
    }

    /// Decodes the first columns in order: `let (id, name) = try row.decode((Int64, String).self)`.
    public func decode<each Column: PostgresDecodable>(
        _: (repeat each Column).Type
    ) throws(PostgresError) -> (repeat each Column) {
        var column = 0
        func next<T: PostgresDecodable>(_: T.Type) throws(PostgresError) -> T {
            defer { column += 1 }
            return try self.decode(T.self, at: column)
        }
        return (repeat try next((each Column).self))
    }
}

extension PostgresRows {
    /// The single value of a one-row, one-column result (e.g. `SELECT count(*) …`).
    public func scalar<T: PostgresDecodable>(_: T.Type = T.self) throws(PostgresError) -> T {
        guard self.count == 1 else {
            throw PostgresError.decoding("expected one row, got \(self.count)")
        }
        return try self[0].decode(T.self, at: 0)
    }
}
