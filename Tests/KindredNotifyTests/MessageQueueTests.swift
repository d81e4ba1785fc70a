import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import Testing

@testable import KindredNotify

@Suite("Notify's queue fed by chat's MessageSent against PostgreSQL")
struct MessageQueueTests {
    static func sent(_ sender: String, to recipient: String, thread: String) throws -> Kindred.Common.V1.Event {
        var event = Kindred.Common.V1.Event()
        event.eventId = try UUIDv7.generate()
        event.userId = sender
        event.payload = .messageSent(.with {
            $0.threadId = thread
            $0.messageId = try! UUIDv7.generate()
            $0.recipientUserId = recipient
        })
        return event
    }

    /// (state, item_count, latest message) of each message notification to `user`, oldest first.
    static func rows(_ harness: NotifyHarness, _ user: String) async throws -> [(String, Int32, String)] {
        try await harness.database.query(
            """
            SELECT state, item_count, latest_message_id::text FROM notifications
            WHERE user_id = \(user)::uuid AND kind = 'new_message' ORDER BY created_at
            """
        ).map { try $0.decode((String, Int32, String).self) }
    }

    @Test func messagesOfOneThreadWhileItsNotificationWaitsBecomeThatOne() async throws {
        try await NotifyHarness.with(settings: ["KINDRED_NOTIFY_MESSAGE_COLLAPSE_MS": "60000"]) { harness in
            let (ann, bob) = (try NotifyHarness.member(), try NotifyHarness.member())
            let (thread, other) = (try UUIDv7.generate(), try UUIDv7.generate())
            let burst = try (0..<3).map { _ in try Self.sent(ann.id, to: bob.id, thread: thread) }
            _ = try await harness.client.deliver(N.deliverEvents, burst, from: "chat", tokens: testKeys)
            // Redelivered: nothing more.
            _ = try await harness.client.deliver(N.deliverEvents, [burst[2]], from: "chat", tokens: testKeys)
            let rows = try await Self.rows(harness, bob.id)
            #expect(rows.count == 1)
            #expect(rows.first?.0 == "pending" && rows.first?.1 == 3)
            if case .messageSent(let last)? = burst[2].payload { #expect(rows.first?.2 == last.messageId) }
            // Another thread: its own notification.
            _ = try await harness.client.deliver(
                N.deliverEvents, [try Self.sent(ann.id, to: bob.id, thread: other)], from: "chat", tokens: testKeys)
            #expect(try await Self.rows(harness, bob.id).count == 2)
            #expect(try await Self.rows(harness, ann.id).isEmpty)
        }
    }

    @Test func aClaimedNotificationTakesNoMoreMessages() async throws {
        try await NotifyHarness.with(settings: ["KINDRED_NOTIFY_MESSAGE_COLLAPSE_MS": "0"]) { harness in
            let (ann, bob) = (try NotifyHarness.member(), try NotifyHarness.member())
            let thread = try UUIDv7.generate()
            _ = try await harness.client.deliver(
                N.deliverEvents, [try Self.sent(ann.id, to: bob.id, thread: thread)], from: "chat", tokens: testKeys)
            let claimed = try await NotificationStore().claimDue(limit: 10, lease: .seconds(60), in: harness.database)
            #expect(claimed.count == 1 && claimed.first?.thread == thread && claimed.first?.itemCount == 1)
            _ = try await harness.client.deliver(
                N.deliverEvents, [try Self.sent(ann.id, to: bob.id, thread: thread)], from: "chat", tokens: testKeys)
            #expect(try await Self.rows(harness, bob.id).map(\.1) == [1, 1])
        }
    }

    /// With no collapse window a message arriving while its thread's notification is on its way queues another,
    /// due at once: it is claimed only once the first one ended, so the device gets them in order (the newest,
    /// which it keeps under the thread's collapse id, last).
    @Test func aThreadsNextNotificationWaitsUntilTheOneOnItsWayEnded() async throws {
        try await NotifyHarness.with(settings: ["KINDRED_NOTIFY_MESSAGE_COLLAPSE_MS": "0"]) { harness in
            let (ann, bob) = (try NotifyHarness.member(), try NotifyHarness.member())
            let (thread, other) = (try UUIDv7.generate(), try UUIDv7.generate())
            let store = NotificationStore()
            _ = try await harness.client.deliver(
                N.deliverEvents, [try Self.sent(ann.id, to: bob.id, thread: thread)], from: "chat", tokens: testKeys)
            let first = try await store.claimDue(limit: 10, lease: .seconds(60), in: harness.database)
            #expect(first.count == 1)
            _ = try await harness.client.deliver(
                N.deliverEvents,
                [try Self.sent(ann.id, to: bob.id, thread: thread), try Self.sent(ann.id, to: bob.id, thread: other)],
                from: "chat", tokens: testKeys)
            let meanwhile = try await store.claimDue(limit: 10, lease: .seconds(60), in: harness.database)
            #expect(meanwhile.map(\.thread) == [other], "only the other thread's notification is claimed")
            try await store.record([.finished(first[0].id, as: "sent")], in: harness.database)
            let next = try await store.claimDue(limit: 10, lease: .seconds(60), in: harness.database)
            #expect(next.map(\.thread) == [thread])
        }
    }

    /// The statement that queues a message, case by case: a message joins its thread's waiting notification only
    /// while no sender holds it and no attempt was made (``MessageCollapse``); otherwise it queues a new one, unless
    /// the message has one already; turned-off messages and a block queue nothing.
    @Test func aMessageJoinsOnlyANotificationNoDeviceHasYet() async throws {
        try await NotifyHarness.with { harness in
            let (ann, bob, cat) = (try NotifyHarness.member(), try NotifyHarness.member(), try NotifyHarness.member())
            let thread = try UUIDv7.generate()
            let key = MessageCollapse.key(thread: thread)
            let store = NotificationStore()
            func queue(_ message: String, to user: String = bob.id, from sender: String = ann.id, wanted: Bool = true)
                async throws -> NotificationStore.MessageQueueing
            {
                try await store.queueMessage(
                    id: try UUIDv7.generate(), to: user, from: sender, thread: thread, message: message,
                    collapseKey: key, delay: .zero, wantedByDefault: wanted, in: harness.database)
            }
            let first = try UUIDv7.generate()
            #expect(try await queue(first) == .queued, "nothing waiting: a new notification")
            #expect(try await queue(try UUIDv7.generate()) == .merged, "waiting, unclaimed, never tried: it joins")
            #expect(try await Self.rows(harness, bob.id).map(\.1) == [2])

            // Tried and put back for later: some device may show it, so it takes no more.
            let tried = try await store.claimDue(limit: 10, lease: .seconds(60), in: harness.database)
            #expect(tried.count == 1)
            try await store.record(
                [.init(id: tried[0].id, outcome: .retry(after: .seconds(60), attempt: true))], in: harness.database)
            #expect(try await queue(try UUIDv7.generate()) == .queued, "tried already: a new one")
            #expect(try await Self.rows(harness, bob.id).map(\.1) == [2, 1])

            // The tried one sent; a sender holds the newer one: it takes no more either.
            try await store.record([.finished(tried[0].id, as: "sent")], in: harness.database)
            let held = try await store.claimDue(limit: 10, lease: .seconds(60), in: harness.database)
            #expect(held.count == 1 && held[0].id != tried[0].id)
            #expect(try await queue(first) == .present, "a message with a notification of its own: nothing more")
            #expect(try await queue(try UUIDv7.generate()) == .queued, "a sender holds it: a new one")
            #expect(try await Self.rows(harness, bob.id).map(\.1) == [2, 1, 1])

            #expect(try await queue(try UUIDv7.generate(), to: cat.id, wanted: false) == .unwanted)
            try await BlockStore().record(blocker: cat.id, blocked: ann.id, active: true, sequence: 1, in: harness.database)
            #expect(try await queue(try UUIDv7.generate(), to: cat.id) == .blocked)
            #expect(try await queue(try UUIDv7.generate(), to: ann.id, from: cat.id) == .blocked, "either way")
            #expect(try await Self.rows(harness, cat.id).isEmpty)
            #expect(try await Self.rows(harness, ann.id).isEmpty)
        }
    }

    @Test func aBlockCancelsWaitingMessagesAndTurningMessagesOffQueuesNone() async throws {
        try await NotifyHarness.with(settings: ["KINDRED_NOTIFY_MESSAGE_COLLAPSE_MS": "60000"]) { harness in
            let (ann, bob) = (try NotifyHarness.member(), try NotifyHarness.member())
            _ = try await harness.client.deliver(
                N.deliverEvents, [try Self.sent(ann.id, to: bob.id, thread: try UUIDv7.generate())], from: "chat",
                tokens: testKeys)
            var block = Kindred.Common.V1.Event()
            block.eventId = try UUIDv7.generate()
            block.userId = bob.id
            block.payload = .userBlocked(.with { $0.blockedUserId = ann.id })
            _ = try await harness.client.deliver(N.deliverEvents, [block], from: "match", tokens: testKeys)
            #expect(try await Self.rows(harness, bob.id).map(\.0) == ["cancelled"])

            var update = Notify.UpdateNotificationSettingsRequest()
            update.settings = .with { $0.newMatch = true }
            _ = try await harness.client.call(N.updateNotificationSettings, update, token: ann.token)
            _ = try await harness.client.deliver(
                N.deliverEvents, [try Self.sent(bob.id, to: ann.id, thread: try UUIDv7.generate())], from: "chat",
                tokens: testKeys)
            #expect(try await Self.rows(harness, ann.id).isEmpty)
        }
    }
}
