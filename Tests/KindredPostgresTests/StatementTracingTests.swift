import Testing

@testable import KindredPostgres

/// A statement span's name is its operation: the first keyword, whatever precedes it, never any data.
@Suite struct StatementTracingTests {
    @Test(arguments: [
        ("SELECT 1", "SELECT"),
        ("  select id FROM t WHERE id = $1", "SELECT"),
        ("\n    WITH written AS (INSERT INTO t VALUES ($1)) SELECT 1", "WITH"),
        ("(SELECT 1) UNION (SELECT 2)", "SELECT"),
        ("INSERT INTO events_outbox (event_id) VALUES ($1::uuid)", "INSERT"),
        ("COMMIT", "COMMIT"),
        ("", ""),
        ("$1", ""),
    ])
    func operation(sql: String, expected: String) {
        #expect(StatementTracing.operation(of: sql) == expected)
    }
}
