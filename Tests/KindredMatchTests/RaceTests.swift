import Foundation
import KindredGRPC
import KindredMatch
import KindredPostgres
import KindredProto
import Logging
import Testing

/// Atomic match detection: simultaneous mutual likes from separate connections make exactly one match per pair.
@Suite struct RaceTests {
    @Test func thousandPairsOfSimultaneousMutualLikesMakeExactlyThousandMatches() async throws {
        try await MatchHarness.with(settings: ["KINDRED_MATCH_SWIPE_WRITERS": "3", "KINDRED_MATCH_SWIPE_BATCH": "64"]) { h in
            try await h.community("dating")
            let pairs = 1000
            let m = try await h.members(2 * pairs, community: "dating")
            var logger = Logger(label: "kindred.match.test.race")
            logger.logLevel = .error
            // Separate connections: the two likes of a pair always travel on two different clients.
            let clients = (0..<8).map { _ in h.server.makeClient(logger: logger) }
            // Both likes of a pair leave together; at most 100 pairs are in flight, so the test does not starve
            // the suites running beside it.
            let outcomes = try await withThrowingTaskGroup(of: MatchApi.SwipeOutcome.self) { group in
                var counts: [MatchApi.SwipeOutcome: Int] = [:]
                for pair in 0..<pairs {
                    if pair >= 100 {
                        for _ in 0..<2 { if let outcome = try await group.next() { counts[outcome, default: 0] += 1 } }
                    }
                    let (a, b) = (m[2 * pair], m[2 * pair + 1])
                    for (index, (from, to)) in [(a, b), (b, a)].enumerated() {
                        let client = clients[(2 * pair + index) % clients.count]
                        group.addTask {
                            try await client.unary(
                                M.swipe, .with {
                                    $0.targetUserId = to.id
                                    $0.action = .like
                                }, metadata: ["authorization": .string("Bearer " + from.token)]
                            ).outcome
                        }
                    }
                }
                return try await group.reduce(into: counts) { $0[$1, default: 0] += 1 }
            }
            for client in clients { await client.close() }
            #expect(outcomes[.matched] == pairs, "exactly one of each pair's likes made the match")
            #expect(outcomes[.recorded] == pairs)
            let matches = try await h.database.query("SELECT count(*) FROM matches").scalar(Int64.self)
            #expect(matches == Int64(pairs))
            #expect(try await h.outboxCount("match.created") == pairs)
            #expect(try await h.outboxCount("swipe.recorded") == 2 * pairs)
            // Every event has its own partition sequence: per partition, sequences are distinct.
            let duplicates = try await h.database.query(
                "SELECT count(*) FROM (SELECT partition_key, sequence FROM events_outbox GROUP BY 1, 2 HAVING count(*) > 1) d"
            ).scalar(Int64.self)
            #expect(duplicates == 0)
        }
    }
}
