import KindredTracing
import Tracing

/// A client span per statement (OpenTelemetry's database conventions) while `TraceSwitch.isOn`, for statements made
/// inside a trace (a call's handler, an event's consumer): named after the statement's operation (`SELECT`,
/// `INSERT`, `WITH`…), with `db.system` `postgresql`, `db.operation.name` and `db.query.text` — the SQL with its `$n`
/// placeholders, never the bound values (no personal data in telemetry). Background loops' statements (the relays'
/// claims, purges, pool checks) belong to no trace and make no span: they would each be a trace of one span.
enum StatementTracing {
    /// The context statements run in now, when they should be traced.
    static var context: ServiceContext? {
        guard TraceSwitch.isOn else { return nil }
        return ServiceContext.current
    }

    /// Runs `body`, the round trip of `query`, in a span of the statement when it should be traced.
    static func traced<T>(_ query: PostgresQuery, _ body: () async throws -> T) async throws -> T {
        guard let context = Self.context else { return try await body() }
        let span = Self.start(query, in: context)
        do {
            let result = try await body()
            Self.end(span, error: nil)
            return result
        } catch {
            Self.end(span, error: error as? PostgresError)
            throw error
        }
    }

    static func start(_ query: PostgresQuery, in context: ServiceContext, batchSize: Int? = nil) -> any Span {
        let operation = Self.operation(of: query.sql)
        let span = startSpan(operation, context: context, ofKind: .client)
        span.attributes["db.system"] = "postgresql"
        span.attributes["db.operation.name"] = operation
        span.attributes["db.query.text"] = query.sql
        if let batchSize { span.attributes["db.operation.batch.size"] = batchSize }
        return span
    }

    static func end(_ span: any Span, error: PostgresError?) {
        if let error {
            // The SQLSTATE, not the server's message: that may quote a value.
            span.attributes["db.response.status_code"] = error.sqlState ?? "\(error.code)"
            span.setStatus(SpanStatus(code: .error))
        }
        span.end()
    }

    /// The statement's first keyword, upper-cased.
    static func operation(of sql: String) -> String {
        let word = sql.utf8.drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x09 || $0 == 0x0D || $0 == 0x28 }
            .prefix { ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) }
        return String(decoding: word, as: UTF8.self).uppercased()
    }
}
