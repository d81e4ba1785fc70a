import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import Testing

@testable import KindredNotify

@Suite("Events about a deleted member, arriving after the deletion, against PostgreSQL")
struct DeletedMemberTests {
    static func deleted(_ user: String) throws -> Kindred.Common.V1.Event {
        var event = Kindred.Common.V1.Event()
        event.eventId = try UUIDv7.generate()
        event.userId = user
        event.payload = .accountDeleted(.init())
        return event
    }

    static let zero: [String: Int64] = [
        "devices": 0, "settings": 0, "notifications": 0, "digest_likes": 0, "blocks": 0, "webhook_deliveries": 0,
    ]

    /// Auth's AccountDeleted first, then what match and chat said before it (their outboxes are not ordered with
    /// auth's): a match, a message both ways and likes both ways. Nothing names the deleted member afterwards, and
    /// the survivor gets nothing about them either; the same events about two other members are applied as usual.
    @Test func eventsNamingADeletedMemberAfterTheDeletionStoreNothing() async throws {
        try await NotifyHarness.with { harness in
            let (ann, bob) = (try NotifyHarness.member(), try NotifyHarness.member())
            let (cat, dan) = (try NotifyHarness.member(), try NotifyHarness.member())
            _ = try await harness.client.deliver(N.deliverEvents, [try Self.deleted(ann.id)], from: "auth", tokens: testKeys)

            let thread = try UUIDv7.generate()
            _ = try await harness.client.deliver(
                N.deliverEvents,
                [try QueueTests.matchCreated(ann.id, bob.id, match: try UUIDv7.generate()),
                 try QueueTests.matchCreated(cat.id, dan.id, match: try UUIDv7.generate()),
                 try LikesDigestQueueTests.like(ann.id, bob.id), try LikesDigestQueueTests.like(bob.id, ann.id),
                 try LikesDigestQueueTests.like(cat.id, dan.id)],
                from: "match", tokens: testKeys)
            _ = try await harness.client.deliver(
                N.deliverEvents,
                [try MessageQueueTests.sent(ann.id, to: bob.id, thread: thread),
                 try MessageQueueTests.sent(bob.id, to: ann.id, thread: thread),
                 try MessageQueueTests.sent(cat.id, to: dan.id, thread: try UUIDv7.generate())],
                from: "chat", tokens: testKeys)

            #expect(try await harness.footprint(ann.id) == Self.zero)
            #expect(try await harness.footprint(bob.id) == Self.zero)
            // The pair that was not deleted: a match each, Dan's message notification and his likes digest.
            let kinds = try await harness.database.query(
                "SELECT string_agg(kind, ',' ORDER BY kind) FROM notifications WHERE user_id = \(dan.id)::uuid"
            ).scalar(String.self)
            #expect(kinds == "likes,new_match,new_message")
            #expect(try await harness.footprint(cat.id)["notifications"]! > 0)
            #expect(try await harness.footprint(dan.id)["digest_likes"] == 1)
            // The tombstone is the id and the time, nothing else.
            let columns = try await harness.database.query(
                """
                SELECT string_agg(column_name::text, ',' ORDER BY column_name) FROM information_schema.columns
                WHERE table_schema = 'notify' AND table_name = 'deleted_members'
                """
            ).scalar(String.self)
            #expect(columns == "deleted_at,user_id")
        }
    }

    /// One batch of auth's: Ann's deletion, then her deactivation and Bob's. The batch reads the tombstones once,
    /// before its first event; the deletion applied in it counts for the events after it: Ann's deactivation is
    /// dropped (no webhook about her), Bob's is applied.
    @Test func aDeletionCountsForTheLaterEventsOfItsOwnBatch() async throws {
        try await NotifyHarness.with { harness in
            let endpoint = try #require(
                try await WebhookAdminTests.create(harness, events: ["account.deactivated"]).endpoint
            ).endpointId
            let (ann, bob) = (try NotifyHarness.member(), try NotifyHarness.member())
            func deactivated(_ user: String) throws -> Kindred.Common.V1.Event {
                var event = Kindred.Common.V1.Event()
                event.eventId = try UUIDv7.generate()
                event.userId = user
                event.payload = .accountDeactivated(.init())
                return event
            }
            _ = try await harness.client.deliver(
                N.deliverEvents, [try Self.deleted(ann.id), try deactivated(ann.id), try deactivated(bob.id)],
                from: "auth", tokens: testKeys)
            let deliveries = try await WebhookAdminTests.deliveries(harness, endpoint)
            #expect(deliveries.count == 1)
            #expect(try await harness.footprint(ann.id) == Self.zero)
            #expect(try await harness.footprint(bob.id)["webhook_deliveries"] == 1)
        }
    }

    /// A redelivered deletion keeps the first tombstone; the purge deletes tombstones older than the retention it is
    /// given and keeps newer ones; once purged, an event about the member is applied again. The ages stay inside the
    /// inbox's 8-day retention: the server's own purge, which starts with it, must find nothing to take.
    @Test func tombstonesArePurgedAfterTheEventsRetention() async throws {
        try await NotifyHarness.with { harness in
            let (ann, bob, cat) = (try NotifyHarness.member(), try NotifyHarness.member(), try NotifyHarness.member())
            _ = try await harness.client.deliver(
                N.deliverEvents, [try Self.deleted(ann.id), try Self.deleted(bob.id), try Self.deleted(ann.id)],
                from: "auth", tokens: testKeys)
            try await harness.database.execute(
                "UPDATE deleted_members SET deleted_at = now() - interval '3 days' WHERE user_id = \(ann.id)::uuid"
            )
            let store = DeletedMemberStore()
            #expect(try await store.purge(olderThan: .seconds(2 * 86_400), in: harness.database) == 1)
            let left = try await harness.database.query("SELECT user_id::text FROM deleted_members")
                .map { try $0.decode(String.self, at: 0) }
            #expect(left == [bob.id])
            _ = try await harness.client.deliver(
                N.deliverEvents, [try QueueTests.matchCreated(ann.id, cat.id, match: try UUIDv7.generate())],
                from: "match", tokens: testKeys)
            #expect(try await harness.footprint(cat.id)["notifications"] == 2)
        }
    }

    @Test func theMembersAnEventNames() throws {
        let (ann, bob) = (try UUIDv7.generate(), try UUIDv7.generate())
        #expect(NotifyService.members(namedBy: try QueueTests.matchCreated(ann, bob, match: try UUIDv7.generate()))
            == [ann, bob].sorted())
        #expect(NotifyService.members(namedBy: try MessageQueueTests.sent(ann.uppercased(), to: bob, thread: "t"))
            == [ann, bob].sorted())
        #expect(NotifyService.members(namedBy: try LikesDigestQueueTests.like(ann, "not-a-uuid")) == [ann])
    }
}
