import Foundation
import KindredChat
import KindredGRPC
import KindredProto
import KindredServiceKit
import Testing

@Suite("Chat threads: closing, receipts, deactivation, deletion", .serialized)
struct ThreadLifecycleTests {
    func ended(_ chat: ChatHarness, _ thread: String, by user: ChatHarness.User?, _ reason: Kindred.Common.V1.MatchEndReason)
        -> Kindred.Common.V1.Event
    {
        var event = Kindred.Common.V1.Event()
        event.userId = user?.id ?? ""
        event.communityId = chat.community
        var ended = Kindred.Common.V1.MatchEnded()
        ended.matchId = thread
        ended.endedByUserId = user?.id ?? ""
        ended.reason = reason
        event.payload = .matchEnded(ended)
        return event
    }

    /// An ended thread is gone for both (the policy's `unmatched`): send, history, receipts and typing answer
    /// NOT_FOUND exactly as for an unknown thread, the same for either side, whatever ended it.
    @Test func unmatchClosesForBothWithoutSayingWhoAndARematchOpensANewThread() async throws {
        try await ChatHarness.with(settings: SubscribeTests.live) { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            try await chat.send(bob, thread, "hi")
            let aliceStream = StreamRecorder.start(chat.client, alice)
            let bobStream = StreamRecorder.start(chat.client, bob)
            for stream in [aliceStream, bobStream] { await stream.waitUntilLive() }
            try await chat.deliver([self.ended(chat, thread, by: alice, .unmatched)], from: "match")
            var errors: [String] = []
            for user in [alice, bob] {
                let error = await expectRPCError(.notFound, reason: "NOT_FOUND") {
                    try await chat.send(user, thread, "still there?")
                }
                errors.append(error?.message ?? "")
                let history = await expectRPCError(.notFound, reason: "NOT_FOUND") {
                    _ = try await chat.history(user, thread)
                }
                errors.append(history?.message ?? "")
            }
            #expect(Set(errors) == ["No such thread"])
            let (aliceThreads, bobThreads) = (try await chat.threads(alice), try await chat.threads(bob))
            #expect(aliceThreads.isEmpty && bobThreads.isEmpty)
            func closed(_ stream: StreamRecorder) -> Chat.ThreadClosedReason? {
                stream.events.compactMap { if case .threadClosed(let notice)? = $0.event { notice.reason } else { nil } }.first
            }
            await aliceStream.wait { closed($0) != nil }
            await bobStream.wait { closed($0) != nil }
            #expect(closed(aliceStream) == .unmatchedByYou)
            #expect(closed(bobStream) == .ended)
            await aliceStream.cancel()
            await bobStream.cancel()
            let again = try await chat.thread(alice, bob)
            #expect(again != thread)
            try await chat.send(alice, again, "second chance")
            #expect(try await chat.threads(bob).map(\.threadId) == [again])
        }
    }

    @Test func blockClosesEveryThreadOfThePairAndTheBlockedSideOnlyLearnsItEnded() async throws {
        try await ChatHarness.with { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            var event = Kindred.Common.V1.Event()
            event.userId = bob.id
            event.payload = .userBlocked(.with { $0.blockedUserId = alice.id })
            try await chat.deliver([event], from: "match")
            await expectRPCError(.notFound, reason: "NOT_FOUND") { try await chat.send(alice, thread, "?") }
            await expectRPCError(.notFound, reason: "NOT_FOUND") { _ = try await chat.history(alice, thread) }
            let log = try await chat.database.query(
                "SELECT user_id::text, event FROM stream_events WHERE thread_id = \(thread)::uuid ORDER BY user_id, sequence")
            var reasons: [String: Chat.ThreadClosedReason] = [:]
            for row in log {
                let event = try Chat.ChatEvent(serializedBytes: try row.decode([UInt8].self, at: 1))
                if case .threadClosed(let notice)? = event.event { reasons[try row.decode(String.self, at: 0)] = notice.reason }
            }
            #expect(reasons == [bob.id: .blockedByYou, alice.id: .ended])
        }
    }

    @Test func receiptsUnreadCountsAndHiddenReadReceipts() async throws {
        try await ChatHarness.with(settings: SubscribeTests.live) { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            var sent: [Chat.ChatMessage] = []
            for index in 1...3 { sent.append(try await chat.send(alice, thread, "m\(index)").message!) }
            try await chat.send(bob, try await chat.thread(bob, try await chat.user()), "elsewhere")
            func unread(_ user: ChatHarness.User) async throws -> Chat.GetUnreadCountResponse {
                try await chat.client.unary(ChatMethod.getUnreadCount, .init(), metadata: user.metadata)
            }
            let totals = try await unread(bob)
            #expect(totals.unreadMessages == 3 && totals.unreadThreads == 1)
            _ = try await chat.client.unary(
                ChatMethod.markDelivered, .with { $0.threadId = thread; $0.upToMessageId = sent[2].messageId },
                metadata: bob.metadata)
            let marked = try await chat.client.unary(
                ChatMethod.markRead, .with { $0.threadId = thread; $0.upToMessageId = sent[1].messageId },
                metadata: bob.metadata)
            #expect(marked.unreadCount == 1)
            // Never backwards.
            let back = try await chat.client.unary(
                ChatMethod.markRead, .with { $0.threadId = thread; $0.upToMessageId = sent[0].messageId },
                metadata: bob.metadata)
            #expect(back.unreadCount == 1)
            var view = try await chat.threads(alice).first { $0.threadId == thread }!
            #expect(view.otherReadUpToMessageId == sent[1].messageId)
            #expect(view.otherDeliveredUpToMessageId == sent[2].messageId)
            #expect(try await unread(bob).unreadMessages == 1)
            // Bob hides read receipts: alice no longer sees his reads (and he would not see hers).
            let settings = try await chat.client.unary(
                ChatMethod.updateChatSettings, .with { $0.settings = .with { $0.hideReadReceipts = true } },
                metadata: bob.metadata)
            #expect(settings.hideReadReceipts)
            view = try await chat.threads(alice).first { $0.threadId == thread }!
            #expect(view.otherReadUpToMessageId.isEmpty)
            #expect(view.otherDeliveredUpToMessageId == sent[2].messageId)
            let aliceStream = StreamRecorder.start(chat.client, alice)
            await aliceStream.waitUntilLive()
            _ = try await chat.client.unary(
                ChatMethod.markRead, .with { $0.threadId = thread; $0.upToMessageId = sent[2].messageId },
                metadata: bob.metadata)
            try await chat.send(bob, thread, "read it")
            await aliceStream.wait { !$0.messages.isEmpty }
            #expect(!aliceStream.events.contains { if case .readReceipt? = $0.event { true } else { false } })
            await aliceStream.cancel()
        }
    }

    @Test func deactivationHidesAndReactivationRestores() async throws {
        try await ChatHarness.with { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            try await chat.send(alice, thread, "hello")
            func account(_ payload: Kindred.Common.V1.Event.Payload) -> Kindred.Common.V1.Event {
                var event = Kindred.Common.V1.Event()
                event.userId = alice.id
                event.payload = payload
                return event
            }
            try await chat.deliver([account(.accountDeactivated(.init()))], from: "auth")
            #expect(try await chat.threads(bob).isEmpty)
            await expectRPCError(.notFound, reason: "NOT_FOUND") { try await chat.send(bob, thread, "?") }
            await expectRPCError(.notFound) { _ = try await chat.history(bob, thread) }
            #expect(try await chat.client.unary(ChatMethod.getUnreadCount, .init(), metadata: bob.metadata).unreadMessages == 0)
            try await chat.deliver([account(.accountReactivated(.init()))], from: "auth")
            #expect(try await chat.threads(bob).map(\.threadId) == [thread])
            try await chat.send(bob, thread, "welcome back")
        }
    }

    @Test func deletionLeavesNothingOfTheUser() async throws {
        try await ChatHarness.with { chat in
            let (alice, bob, carol) = (try await chat.user(), try await chat.user(), try await chat.user())
            let first = try await chat.thread(alice, bob)
            let second = try await chat.thread(carol, alice)
            try await chat.send(alice, first, "hi bob")
            try await chat.send(bob, first, "hi alice")
            try await chat.send(carol, second, "hi")
            _ = try await chat.client.unary(ChatMethod.updateChatSettings, .with { $0.settings = .with { $0.hideReadReceipts = true } }, metadata: alice.metadata)
            let before = try await chat.footprint(alice)
            #expect(before["threads"] == 2 && before["messages_sent"] == 1 && before["settings"] == 1)
            var event = Kindred.Common.V1.Event()
            event.userId = alice.id
            event.payload = .accountDeleted(.init())
            try await chat.deliver([event], from: "auth")
            #expect(try await chat.footprint(alice).values.allSatisfy { $0 == 0 })
            // Bob's and carol's own data about other threads stays; the deleted conversations go.
            #expect(try await chat.threads(bob).isEmpty)
            let bobLog = try await chat.database.query(
                "SELECT event FROM stream_events WHERE user_id = \(bob.id)::uuid ORDER BY sequence")
            let kinds = try bobLog.map { try Chat.ChatEvent(serializedBytes: try $0.decode([UInt8].self, at: 0)).event }
            #expect(kinds.count == 1)
            if case .threadClosed(let notice)? = kinds.first { #expect(notice.reason == .ended) } else {
                Issue.record("bob should learn that the thread ended")
            }
            let leftovers = try await chat.database.query(
                "SELECT count(*) FROM messages WHERE body LIKE '%alice%' OR body = 'hi'").scalar(Int.self)
            #expect(leftovers == 0)
        }
    }
}
