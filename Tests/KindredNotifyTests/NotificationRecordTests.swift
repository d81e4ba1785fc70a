import Foundation
import KindredPostgres
import KindredServiceKit
import Testing

@testable import KindredNotify

/// ``NotificationStore/record(_:in:)``: the ends of several attempts recorded in one statement, each as the sender
/// decided, against PostgreSQL.
@Suite("Recording how attempts ended")
struct NotificationRecordTests {
    struct Row: Equatable {
        var state: String
        var attempts: Int32
        var claimed: Bool
        var finished: Bool
        var dueLater: Bool
    }

    static func row(_ id: String, _ harness: NotifyHarness) async throws -> Row? {
        try await harness.database.query(
            """
            SELECT state, attempts, claimed_at IS NOT NULL, finished_at IS NOT NULL, next_attempt_at > now() + interval '1 minute'
            FROM notifications WHERE notification_id = \(id)::uuid
            """
        ).first.map { row in
            let (state, attempts, claimed, finished, later) = try row.decode((String, Int32, Bool, Bool, Bool).self)
            return Row(state: state, attempts: attempts, claimed: claimed, finished: finished, dueLater: later)
        }
    }

    static func deliveries(_ id: String, _ harness: NotifyHarness) async throws -> [String] {
        try await harness.database.query(
            "SELECT device_id::text FROM notification_deliveries WHERE notification_id = \(id)::uuid ORDER BY 1"
        ).map { try $0.decode(String.self, at: 0) }
    }

    @Test func endsOfSeveralAttemptsAreRecordedEachAsDecided() async throws {
        try await NotifyHarness.with { harness in
            let store = NotificationStore()
            let member = try NotifyHarness.member().id
            var ids: [String] = []
            for _ in 0..<4 {
                let id = try UUIDv7.generate()
                try await store.enqueue(
                    id: id, to: member, kind: .newMatch, about: try UUIDv7.generate(), source: try UUIDv7.generate(),
                    collapseKey: nil, in: harness.database)
                ids.append(id)
            }
            let (sent, retried, quiet, cancelled) = (ids[0], ids[1], ids[2], ids[3])
            let digest = try UUIDv7.generate()
            try await store.enqueueDigest(id: digest, to: member, due: .now, in: harness.database)
            try await DigestStore().add(liker: try UUIDv7.generate(), to: member, digest: digest, in: harness.database)
            #expect(try await store.claimDue(limit: 10, lease: .seconds(60), in: harness.database).count == 5)
            // Cancelled meanwhile (a block): it stays cancelled whatever the sender says.
            try await harness.database.execute(
                "UPDATE notifications SET state = 'cancelled' WHERE notification_id = \(cancelled)::uuid")
            let (first, second, third) = (try UUIDv7.generate(), try UUIDv7.generate(), try UUIDv7.generate())
            try await store.record(
                [
                    .finished(sent, as: "sent", delivered: [first, second]),
                    .retry(retried, after: .seconds(3600), attempt: true, delivered: [third]),
                    .retry(quiet, after: .seconds(300), attempt: false),
                    .finished(cancelled, as: "sent", delivered: [first]),
                    .finished(digest, as: "sent"),
                ], in: harness.database)
            #expect(try await Self.row(sent, harness)?.state == "sent")
            #expect(try await Self.row(sent, harness)?.finished == true)
            #expect(try await Self.deliveries(sent, harness) == [first, second].sorted())
            #expect(
                try await Self.row(retried, harness)
                    == Row(state: "pending", attempts: 1, claimed: false, finished: false, dueLater: true))
            #expect(try await Self.deliveries(retried, harness) == [third])
            #expect(
                try await Self.row(quiet, harness)
                    == Row(state: "pending", attempts: 0, claimed: false, finished: false, dueLater: true))
            #expect(try await Self.row(cancelled, harness)?.state == "cancelled")
            #expect(try await Self.deliveries(cancelled, harness) == [first], "the device did get it")
            #expect(try await Self.row(digest, harness)?.state == "sent")
            #expect(try await DigestStore().counts(of: [digest], in: harness.database).isEmpty, "the likes told go")
        }
    }
}
