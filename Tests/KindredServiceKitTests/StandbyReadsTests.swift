import CoreMetrics
import KindredGRPC
import KindredGRPCServices
import KindredPostgres
import KindredPostgresTesting
@testable import KindredServiceKit
import Logging
import Testing

/// The standby reads' rules that need no standby: how WAL positions are read, that a server not in recovery is
/// never read from, and the settings. A standby that is behind (replay paused) is in
/// Tests/Cluster/test_database_split.py.
@Suite("StandbyReads: stale-tolerant reads go to a standby only while it is measurably close behind")
struct StandbyReadsTests {
    @Test(
        "WAL positions",
        arguments: [
            ("0/0", UInt64(0)), ("0/311E788", UInt64(0x311E788)), ("1/0", UInt64(1) << 32),
            ("FFFFFFFF/FFFFFFFF", UInt64.max), ("16/B374D848", UInt64(0x16) << 32 | 0xB374D848),
        ] as [(String, UInt64)]
    )
    func positions(text: String, expected: UInt64) {
        #expect(StandbyReads.position(text) == expected)
    }

    @Test("not WAL positions", arguments: ["", "0", "/", "0/", "/0", "1/2/3", "G/0", "100000000/0", "0/100000000", "-1/0"])
    func notPositions(text: String) {
        #expect(StandbyReads.position(text) == nil)
    }

    @Test("a server that is not in recovery is never read from (it may have gone its own way)")
    func notAStandby() async throws {
        let postgres = try await TestPostgres.shared()
        let logger = Logger(label: "test.standby")
        var pool = PostgresClient.PoolConfiguration()
        pool.maxConnections = 1
        let primary = PostgresClient(configuration: postgres.configuration(), pool: pool, logger: logger)
        let notStandby = PostgresClient(configuration: postgres.configuration(), pool: pool, logger: logger)
        let reads = StandbyReads(
            standby: notStandby, primary: primary, maxLag: .seconds(600), pool: "test",
            metricsFactory: NOOPMetricsHandler.instance, logger: logger)
        #expect(reads.client() === nil, "unknown before the first probe")
        await reads.probe()
        #expect(reads.staleness() == nil)
        #expect(reads.client() === nil)
        await notStandby.shutdown()
        await primary.shutdown()
    }

    @Test("the read URL and the lag bound are read, and refused when wrong")
    func settings() throws {
        let none = try DatabaseSettings(server: "demo", schema: "demo", environment: EnvironmentReader([:]))
        #expect(none.readURL == nil && none.readMaxLag == .seconds(2))
        let set = try DatabaseSettings(
            server: "demo", schema: "demo",
            environment: EnvironmentReader([
                "KINDRED_DEMO_READ_DATABASE_URL": "postgresql://kindred_demo@/kindred?host=/tmp/standby&port=5440",
                "KINDRED_DEMO_READ_MAX_LAG_MS": "500",
            ]))
        #expect(set.readURL == "postgresql://kindred_demo@/kindred?host=/tmp/standby&port=5440")
        #expect(set.readMaxLag == .milliseconds(500))
        for (key, value) in [
            ("KINDRED_DEMO_READ_DATABASE_URL", "not a url =="), ("KINDRED_DEMO_READ_MAX_LAG_MS", "0"),
            ("KINDRED_DEMO_READ_MAX_LAG_MS", "600001"),
        ] {
            let error = try #require(throws: ConfigurationError.self) {
                _ = try DatabaseSettings(server: "demo", schema: "demo", environment: EnvironmentReader([key: value]))
            }
            #expect(error.key == key)
        }
    }
}
