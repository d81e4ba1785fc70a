import Foundation
import KindredGRPC
import KindredMatch
import KindredPostgres
import KindredProto
import KindredServiceKit
import Testing

/// Events in: profile's snapshots (newer versions win), auth's account events (deactivation hides, deletion
/// erases); the footprint.
@Suite struct EventsTests {
    @Test func olderProfileSnapshotsAreIgnoredAndRedeliveryDoesNothing() async throws {
        try await MatchHarness.with { h in
            try await h.community("dating")
            let m = try await h.members(2, community: "dating")
            try await h.deliver([h.profileEvent(m[1], eligible: false, version: 3)], from: "profile")
            var old = h.profileEvent(m[1], eligible: true, version: 2)
            old.eventId = try UUIDv7.generate()
            try await h.deliver([old], from: "profile")
            #expect(await h.code(M.swipe, .with { $0.targetUserId = m[1].id; $0.action = .like }, token: m[0].token)
                == .notFound, "version 3 (not eligible) stays")
            let again = try await h.deliver([old], from: "profile")
            #expect(again == [old.eventId], "a redelivered event is acknowledged")
            // Community settings too: an older version does not override.
            try await h.community("dating", mode: .oneWay, version: 5)
            try await h.community("dating", mode: .mutual, version: 4)
            try await h.deliver([h.profileEvent(m[1], eligible: true, version: 4)], from: "profile")
            #expect(try await h.swipe(m[0], m[1], .like).outcome == .connected)
        }
    }

    @Test func deactivationHidesAndReactivationRestores() async throws {
        try await MatchHarness.with { h in
            try await h.community("dating")
            let m = try await h.members(2, community: "dating")
            try await h.swipe(m[0], m[1], .like)
            try await h.swipe(m[1], m[0], .like)
            func account(_ payload: CommonApi.Event.Payload) -> CommonApi.Event {
                var event = CommonApi.Event()
                event.userId = m[1].id
                event.communityId = "dating"
                event.payload = payload
                return event
            }
            try await h.deliver([account(.accountDeactivated(.init()))], from: "auth")
            #expect(try await h.matches(m[0]).isEmpty)
            try await h.deliver([account(.accountReactivated(.init()))], from: "auth")
            #expect(try await h.matches(m[0]).count == 1, "hidden, not ended")
        }
    }

    @Test func deletionErasesEverythingAboutTheUserInBothDirections() async throws {
        try await MatchHarness.with { h in
            try await h.community("dating")
            let m = try await h.members(4, community: "dating")
            let gone = m[0]
            try await h.swipe(gone, m[1], .like)
            try await h.swipe(m[1], gone, .like)
            try await h.swipe(m[2], gone, .pass)
            try await h.swipe(gone, m[3], .pass)
            _ = try await h.call(M.undo, .init(), token: gone.token)
            try await h.call(M.block, .with { $0.targetUserId = m[2].id }, token: gone.token)
            try await h.call(M.reportUser, .with { $0.targetUserId = gone.id; $0.reason = .spam }, token: m[3].token)
            try await h.call(M.reportUser, .with { $0.targetUserId = m[3].id; $0.reason = .spam }, token: gone.token)
            let admin = testKeys.userToken(try UUIDv7.generate(), community: "dating", roles: ["admin"])
            func footprint() async throws -> [String: Int64] {
                let counts = try await h.call(M.getUserFootprint, .with { $0.userId = gone.id }, token: admin).counts
                return Dictionary(uniqueKeysWithValues: counts.map { ($0.kind, $0.rows) })
            }
            let before = try await footprint()
            #expect(before["swipes_given"] == 1 && before["swipes_received"] == 2 && before["matches"] == 1)
            #expect(before["blocks"] == 1 && before["reports_filed"] == 1 && before["reports_received"] == 1)
            #expect(before["undos"] == 1)
            var deleted = CommonApi.Event()
            deleted.userId = gone.id
            deleted.communityId = "dating"
            deleted.payload = .accountDeleted(.init())
            try await h.deliver([deleted], from: "auth")
            let after = try await footprint()
            #expect(after.count == 9 && after.values.allSatisfy { $0 == 0 }, "\(after)")
            #expect(try await h.matches(m[1]).isEmpty)
            #expect(try await h.outboxCount("match.ended") == 1)
            // Services may read the footprint too.
            let service = try await h.call(
                M.getUserFootprint, .with { $0.userId = gone.id }, token: testKeys.serviceToken("auth"))
            #expect(service.counts.count == 9)
        }
    }

    @Test func aDeletionAppendsItsEventsInAscendingPartitionKeyTheOutboxsLockOrder() async throws {
        try await MatchHarness.with { h in
            try await h.community("dating")
            let m = try await h.members(5, community: "dating").sorted { $0.id < $1.id }
            // The deleted member sits between the others, and the matches are made out of key order, so neither
            // the table's order nor the user's own partition coming last would be ascending.
            let gone = m[2]
            for other in [m[4], m[0], m[3], m[1]] {
                try await h.swipe(gone, other, .like)
                try await h.swipe(other, gone, .like)
            }
            var deleted = CommonApi.Event()
            deleted.userId = gone.id
            deleted.communityId = "dating"
            deleted.payload = .accountDeleted(.init())
            try await h.deliver([deleted], from: "auth")
            let appended = try await h.database.query(
                """
                SELECT partition_key FROM events_outbox WHERE event_type IN ('match.ended', 'account.deleted')
                ORDER BY id
                """
            ).map { try $0.decode(String.self, at: 0) }
            #expect(appended == m.map(\.id), "one event per partition, in ascending key")
        }
    }
}
