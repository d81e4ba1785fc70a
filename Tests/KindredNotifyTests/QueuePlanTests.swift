import KindredServiceKit
import Testing

@testable import KindredNotify
import KindredPostgres

/// The sender's claim reads the due notifications and, for each, its own member's and collapse key's entries, however
/// long the queue: a connection plans each statement once, often while the queue is still empty (a cluster's first
/// minutes), and that plan must not read the whole queue for every row it claims.
@Suite("The claim's plan against a long queue")
struct QueuePlanTests {
    @Test func aClaimPlannedOnAnEmptyQueueReadsOnlyWhatItClaims() async throws {
        try await NotifyHarness.with { harness in
            let store = NotificationStore()
            let claim = store.claimQuery(limit: 64, lease: .seconds(60))
            let buffers = try await harness.database.withConnection { connection in
                // Planned now, on the empty table, as the sender's connection plans it on a cluster's first claim.
                #expect(try await connection.query(claim).count == 0)
                // 5,000 due messages in 2,000 threads, the oldest due first.
                try await connection.execute(
                    """
                    INSERT INTO notifications
                        (notification_id, user_id, kind, source_id, collapse_key, created_at, next_attempt_at)
                    SELECT gen_random_uuid(), md5('member' || g % 2000)::uuid, 'new_message', g::text,
                           'thread-' || g % 2000,
                           now() - (5000 - g) * interval '1 second', now() - (5000 - g) * interval '1 second'
                    FROM generate_series(1, 5000) AS g
                    """
                )
                try await connection.execute("BEGIN")
                let plan = try #require(try await connection.explainPreparedPlan(of: claim))
                try await connection.execute("ROLLBACK")
                #expect(plan.actualRows == 64, "it claims the 64 oldest, one per thread")
                return plan.buffers
            }
            // About 25 buffers per claimed row (the due index, the thread's entries, the row and its new version); the
            // anti-join planned on the empty table read the collapse index whole for each: ~5,000 buffers per row.
            #expect(buffers < 64 * 60, "the claim read \(buffers) buffers for 64 notifications")
        }
    }
}
