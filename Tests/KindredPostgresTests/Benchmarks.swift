import Foundation
import KindredPostgres
import Testing

/// Throughput figures, not assertions: run with
/// `KINDRED_PG_BENCH=1 swift test -c release --filter PostgresBenchmarks`.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["KINDRED_PG_BENCH"] != nil))
struct PostgresBenchmarks {
    @Test func singleConnectionQueriesAndTransactions() async throws {
        for cacheSize in [256, 0] {
            try await withTestClient(configure: { $0.preparedStatementCacheSize = cacheSize }) { client in
                try await client.execute("CREATE TABLE kv (id bigint PRIMARY KEY, value text NOT NULL)")
                try await client.execute("INSERT INTO kv SELECT g, 'value ' || g FROM generate_series(1, 1000) AS g")
                try await client.execute("VACUUM ANALYZE kv")
                let label = cacheSize > 0 ? "prepared-statement cache on" : "cache off (PQexecParams)"

                try await client.withConnection { connection in
                    let queries = 20_000
                    let start = ContinuousClock.now
                    for index in 0..<queries {
                        let id = Int64(index % 1000 + 1)
                        let rows = try await connection.query("SELECT value FROM kv WHERE id = \(id)")
                        precondition(rows.count == 1)
                    }
                    report("queries, one connection, \(label)", count: queries, since: start)

                    let transactions = 4_000
                    let sequential = ContinuousClock.now
                    for index in 0..<transactions {
                        try await connection.execute("BEGIN")
                        for offset in 0..<5 {
                            let id = Int64((index * 5 + offset) % 1000 + 1)
                            _ = try await connection.query("SELECT value FROM kv WHERE id = \(id)")
                        }
                        try await connection.execute("COMMIT")
                    }
                    report("transactions of 5 lookups, sequential, \(label)", count: transactions, since: sequential)

                    let pipelined = ContinuousClock.now
                    for index in 0..<transactions {
                        var batch: [PostgresQuery] = ["BEGIN"]
                        for offset in 0..<5 {
                            let id = Int64((index * 5 + offset) % 1000 + 1)
                            batch.append("SELECT value FROM kv WHERE id = \(id)")
                        }
                        batch.append("COMMIT")
                        _ = try await connection.pipeline(batch)
                    }
                    report("transactions of 5 lookups, pipelined, \(label)", count: transactions, since: pipelined)
                }

                // The pool path: a lease per query.
                let pooled = 20_000
                let start = ContinuousClock.now
                for index in 0..<pooled {
                    _ = try await client.query("SELECT value FROM kv WHERE id = \(Int64(index % 1000 + 1))")
                }
                report("queries through the pool, one at a time, \(label)", count: pooled, since: start)
            }
        }
    }

    private func report(_ what: String, count: Int, since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let rate = Double(count) / seconds
        let micros = seconds / Double(count) * 1e6
        print("BENCH \(what): \(Int(rate)) /s, \(String(format: "%.1f", micros)) µs each")
    }
}
