import Foundation
import KindredChat
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import Testing

@Suite("Chat Subscribe: live events, resume, replicas, backpressure", .serialized)
struct SubscribeTests {
    /// Heartbeats every 200 ms: a stream's first one says it is live (`StreamRecorder.waitUntilLive`).
    static let live = ["KINDRED_CHAT_HEARTBEAT_MS": "200"]

    @Test func liveMessagesReachBothDevicesOfTheRecipientAndTheSendersOtherDevice() async throws {
        try await ChatHarness.with(settings: Self.live) { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let phone = StreamRecorder.start(chat.client, bob)
            let laptop = StreamRecorder.start(chat.client, bob)
            let alicePhone = StreamRecorder.start(chat.client, alice)
            for stream in [phone, laptop, alicePhone] { await stream.waitUntilLive() }
            let thread = try await chat.thread(alice, bob)
            for index in 1...5 { try await chat.send(alice, thread, "m\(index)") }
            for stream in [phone, laptop, alicePhone] {
                await stream.wait { $0.messages.count == 5 }
                #expect(stream.messages.map(\.sequence) == [1, 2, 3, 4, 5])
                #expect(stream.events.contains { if case .matchCreated? = $0.event { true } else { false } })
                let positions = stream.logged.map { ResumeToken.decode($0.resumeToken)! }
                #expect(positions == Array(positions.sorted()) && Set(positions).count == positions.count)
            }
            for stream in [phone, laptop, alicePhone] { await stream.cancel() }
        }
    }

    @Test func resumingFromTheLastTokenDeliversEveryMissedEventOnceThenLiveOnes() async throws {
        try await ChatHarness.with(settings: Self.live) { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            let first = StreamRecorder.start(chat.client, bob)
            await first.waitUntilLive()
            for index in 1...3 { try await chat.send(alice, thread, "before \(index)") }
            await first.wait { $0.messages.count == 3 }
            await first.cancel()
            let token = first.logged.last!.resumeToken
            for index in 4...10 { try await chat.send(alice, thread, "missed \(index)") }
            let resumed = StreamRecorder.start(chat.client, bob, resumeToken: token)
            await resumed.wait { $0.messages.count == 7 }
            for index in 11...12 { try await chat.send(alice, thread, "live \(index)") }
            await resumed.wait { $0.messages.count == 9 }
            #expect(resumed.messages.map(\.sequence) == Array(4...12))
            // A token ahead of the log (its events are gone: a restore to an earlier time) asks for a resync and
            // carries on from the log's end; a malformed one is refused.
            let ahead = StreamRecorder.start(chat.client, bob, resumeToken: "c1.999999")
            await ahead.wait { !$0.logged.isEmpty }
            guard case .resyncRequired? = ahead.logged.first?.event else {
                Issue.record("expected ResyncRequired, got \(ahead.events)")
                return
            }
            #expect(ahead.logged.first?.resumeToken == resumed.logged.last?.resumeToken)
            try await chat.send(alice, thread, "after the resync")
            await ahead.wait { $0.messages.count == 1 }
            #expect(ahead.messages.map(\.sequence) == [13])
            await ahead.cancel()
            // The resumed stream, still open, has message 13 too and nothing twice before it (a stream is in order).
            await resumed.wait { $0.messages.count >= 10 }
            #expect(resumed.messages.map(\.sequence) == Array(4...13))
            await resumed.cancel()
            let bad = StreamRecorder.start(chat.client, bob, resumeToken: "c2.5")
            await bad.wait { $0.ended }
            #expect((bad.error as? RPCError)?.code == .invalidArgument)
        }
    }

    @Test func aMessageSentOnOneReplicaReachesASubscriberOnAnother() async throws {
        try await ChatHarness.with(servers: 2, settings: Self.live) { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            let onSecond = StreamRecorder.start(chat.clients[1], bob)
            await onSecond.waitUntilLive()
            for index in 1...20 { try await chat.send(alice, thread, "m\(index)", server: index % 2) }
            await onSecond.wait { $0.messages.count == 20 }
            #expect(onSecond.messages.map(\.sequence) == Array(1...20))
            await onSecond.cancel()
        }
    }

    /// A replica that stops between a commit and its notification never sends it; the streams on the other replicas
    /// then learn of the event when a replica's LISTEN connects (a restart), not with the user's next event only.
    @Test func anEventWhoseNotificationWasNeverSentReachesTheStreamsWhenAReplicaStarts() async throws {
        try await ChatHarness.with(servers: 2, settings: Self.live) { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            let stream = StreamRecorder.start(chat.clients[1], bob)
            await stream.waitUntilLive()
            try await chat.send(alice, thread, "sent")
            await stream.wait { $0.messages.count == 1 }
            // Written into bob's log as a send writes it, without the notification.
            var message = Kindred.Chat.V1.ChatMessage()
            message.messageId = try UUIDv7.generate()
            message.threadId = thread
            message.senderUserId = alice.id
            message.body = "never announced"
            message.sequence = 2
            var event = Kindred.Chat.V1.ChatEvent()
            event.event = .message(message)
            try await chat.database.execute(
                """
                WITH s AS (UPDATE users SET event_sequence = event_sequence + 1 WHERE user_id = \(bob.id)::uuid
                           RETURNING event_sequence)
                INSERT INTO stream_events (user_id, sequence, thread_id, event, occurred_at)
                SELECT \(bob.id)::uuid, event_sequence, \(thread)::uuid, \(try event.serializedBytes()), now() FROM s
                """
            )
            // Three heartbeats: the stream does not read its log by itself.
            try await Task.sleep(for: .milliseconds(600))
            #expect(stream.messages.count == 1)
            let replica = try await TestServer<ChatServerDefinition>.start(settings: chat.chats[0].settings)
            await stream.wait { $0.messages.count == 2 }
            #expect(stream.messages.map(\.body) == ["sent", "never announced"])
            await replica.stop()
            await stream.cancel()
        }
    }

    @Test func typingIsLiveOnlyAndRateLimited() async throws {
        try await ChatHarness.with(settings: Self.live) { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            let stream = StreamRecorder.start(chat.client, bob)
            await stream.waitUntilLive()
            let typing = Chat.SendTypingRequest.with { $0.threadId = thread }
            _ = try await chat.client.unary(ChatMethod.sendTyping, typing, metadata: alice.metadata)
            await stream.wait { $0.events.contains { if case .typing? = $0.event { true } else { false } } }
            let indicator = stream.events.first { if case .typing? = $0.event { true } else { false } }!
            #expect(indicator.resumeToken.isEmpty)
            #expect(try await chat.database.query("SELECT count(*) FROM stream_events WHERE user_id = \(bob.id)::uuid").scalar(Int.self) == 1)
            for _ in 0..<4 { _ = try await chat.client.unary(ChatMethod.sendTyping, typing, metadata: alice.metadata) }
            await expectRPCError(.resourceExhausted, reason: "RATE_LIMITED") {
                _ = try await chat.client.unary(ChatMethod.sendTyping, typing, metadata: alice.metadata)
            }
            await stream.cancel()
        }
    }

    @Test func silentStreamsGetHeartbeats() async throws {
        try await ChatHarness.with(settings: ["KINDRED_CHAT_HEARTBEAT_MS": "200"]) { chat in
            let alice = try await chat.user()
            let stream = StreamRecorder.start(chat.client, alice)
            await stream.wait { $0.events.filter { if case .heartbeat? = $0.event { true } else { false } }.count >= 2 }
            await stream.cancel()
        }
    }

    @Test func aSubscriberThatDoesNotReadIsEndedAndResumesWithoutLoss() async throws {
        let settings = ["KINDRED_CHAT_SUBSCRIBER_BUFFER": "16", "KINDRED_CHAT_DEFAULT_HOURLY_MESSAGE_LIMIT": "10000"]
        try await ChatHarness.with(settings: settings.merging(Self.live) { $1 }) { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            // Stops reading after its first event (a heartbeat: it is live) until every message is sent: the
            // client's window, the server's 256 KiB per stream, then the stream's queue of 16 fill up, and the
            // stream is ended (the reason follows the queued data).
            let slow = StreamRecorder.start(chat.client, bob, stallAfterFirst: true)
            await slow.waitUntilLive()
            let body = String(repeating: "é", count: 1990)  // 4 KB each
            for index in 1...600 { try await chat.send(alice, thread, "\(index) " + body) }
            slow.release()
            await slow.wait { $0.ended }
            let error = slow.error as? RPCError
            #expect(error?.code == .unavailable)
            #expect(error?.errorDetail?.reason == "SUBSCRIBER_TOO_SLOW")
            let token = slow.logged.last?.resumeToken ?? ""
            let resumed = StreamRecorder.start(chat.client, bob, resumeToken: token)
            await resumed.wait { $0.messages.count + slow.messages.count == 600 }
            #expect((slow.messages + resumed.messages).map(\.sequence) == Array(1...600))
            await resumed.cancel()
        }
    }
}
