import Foundation
import KindredChat
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import Testing

@Suite("Chat's MessageSent and GetNotificationContext against a real PostgreSQL", .serialized)
struct NotificationContextTests {
    static func context(
        _ chat: ChatHarness, _ user: ChatHarness.User, thread: String = "", message: String = "", as service: String = "notify"
    ) async throws -> Chat.GetNotificationContextResponse {
        var request = Chat.GetNotificationContextRequest()
        request.userId = user.id
        request.threadId = thread
        request.messageId = message
        return try await chat.client.unary(
            ChatMethod.getNotificationContext, request, metadata: try chat.serviceMetadata(service))
    }

    @Test func aMessageWritesOneMessageSentWithIdsOnlyInItsTransaction() async throws {
        try await ChatHarness.with { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            let sent = try await chat.send(alice, thread, "a secret body", id: "once")
            _ = try await chat.send(alice, thread, "a secret body", id: "once")  // a retry writes nothing more
            let rows = try await chat.database.query(
                "SELECT user_id, event_type, payload FROM events_outbox WHERE event_type = 'message.sent'"
            ).map { try $0.decode((String, String, [UInt8]).self) }
            #expect(rows.count == 1)
            let event = try Kindred.Common.V1.Event(serializedBytes: try #require(rows.first).2)
            guard case .messageSent(let message)? = event.payload else {
                Issue.record("not a MessageSent: \(event)")
                return
            }
            #expect(event.userId == alice.id)
            #expect(message.threadId == thread && message.messageId == sent.message?.messageId)
            #expect(message.recipientUserId == bob.id)
            #expect(!String(decoding: rows[0].2, as: UTF8.self).contains("secret"))
        }
    }

    @Test func presenceBadgeAndBodyAsNotifyAsksForThem() async throws {
        try await ChatHarness.with { chat in
            let (alice, bob, eve) = (try await chat.user(), try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            let sent = try await chat.send(alice, thread, "see you at 8")
            _ = try await chat.send(alice, thread, "bring the dog")
            let messageID = try #require(sent.message?.messageId)

            var context = try await Self.context(chat, bob, thread: thread)
            #expect(!context.online && context.unreadMessages == 2 && context.threadOpen && context.messageBody.isEmpty)
            context = try await Self.context(chat, bob, thread: thread, message: messageID)
            #expect(context.messageBody == "see you at 8")
            // Someone else's thread reads as not open and gives no body.
            context = try await Self.context(chat, eve, thread: thread, message: messageID)
            #expect(!context.threadOpen && context.messageBody.isEmpty && context.unreadMessages == 0)
            // A message of another of the member's threads is not this thread's body.
            let other = try await chat.thread(eve, bob)
            let elsewhere = try #require(try await chat.send(eve, other, "not for this thread").message?.messageId)
            context = try await Self.context(chat, bob, thread: thread, message: elsewhere)
            #expect(context.threadOpen && context.messageBody.isEmpty && context.unreadMessages == 3)

            let stream = StreamRecorder.start(chat.client, bob)
            var online = false
            for _ in 0..<250 where !online {
                online = try await Self.context(chat, bob).online
                if !online { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(online)
            await stream.cancel()
            var offline = false
            for _ in 0..<250 where !offline {
                offline = !(try await Self.context(chat, bob).online)
                if !offline { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(offline)
        }
    }

    @Test func onlyNotifyMayAskAndIdsAreChecked() async throws {
        try await ChatHarness.with { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            await expectRPCError(.permissionDenied) { _ = try await Self.context(chat, bob, thread: thread, as: "match") }
            var request = Chat.GetNotificationContextRequest()
            request.userId = bob.id
            request.threadId = thread
            await expectRPCError(.permissionDenied) {
                _ = try await chat.client.unary(ChatMethod.getNotificationContext, request, metadata: bob.metadata)
            }
            await expectRPCError(.invalidArgument) { _ = try await Self.context(chat, bob, thread: "nope") }
            await expectRPCError(.invalidArgument) {
                _ = try await Self.context(chat, bob, message: try UUIDv7.generate())
            }
        }
    }

    @Test func aBatchAnswersEachAskAsTheSingleCallDoes() async throws {
        try await ChatHarness.with { chat in
            let (alice, bob, eve) = (try await chat.user(), try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            let other = try await chat.thread(eve, bob)
            let sent = try #require(try await chat.send(alice, thread, "see you at 8").message?.messageId)
            let elsewhere = try #require(try await chat.send(eve, other, "not for this thread").message?.messageId)
            // A member twice, someone else's thread, another thread's message, no thread at all.
            let asks: [(ChatHarness.User, String, String)] = [
                (bob, thread, sent), (bob, other, ""), (eve, thread, sent), (bob, thread, elsewhere), (alice, "", ""),
            ]
            var request = Chat.GetNotificationContextsRequest()
            request.requests = asks.map { user, thread, message in
                .with {
                    $0.userId = user.id
                    $0.threadId = thread
                    $0.messageId = message
                }
            }
            let batch = try await chat.client.unary(
                ChatMethod.getNotificationContexts, request, metadata: try chat.serviceMetadata("notify"))
            var singles: [Chat.GetNotificationContextResponse] = []
            for (user, thread, message) in asks {
                singles.append(try await Self.context(chat, user, thread: thread, message: message))
            }
            #expect(batch.contexts == singles)
            #expect(batch.contexts[0].messageBody == "see you at 8" && batch.contexts[0].unreadMessages == 2)
            #expect(!batch.contexts[2].threadOpen && batch.contexts[3].messageBody.isEmpty)

            // Checked as the single call is, each ask named by its place; at most 256; notify only.
            request.requests[1].userId = "nope"
            let error = await expectRPCError(.invalidArgument) {
                _ = try await chat.client.unary(
                    ChatMethod.getNotificationContexts, request, metadata: try chat.serviceMetadata("notify"))
            }
            #expect(error?.errorDetail?.fieldViolations.map(\.field) == ["requests[1].user_id"])
            request.requests = Array(repeating: .with { $0.userId = bob.id }, count: 257)
            await expectRPCError(.invalidArgument) {
                _ = try await chat.client.unary(
                    ChatMethod.getNotificationContexts, request, metadata: try chat.serviceMetadata("notify"))
            }
            request.requests = [.with { $0.userId = bob.id }]
            await expectRPCError(.permissionDenied) {
                _ = try await chat.client.unary(
                    ChatMethod.getNotificationContexts, request, metadata: try chat.serviceMetadata("match"))
            }
            request.requests = []
            #expect(
                try await chat.client.unary(
                    ChatMethod.getNotificationContexts, request, metadata: try chat.serviceMetadata("notify")
                ).contexts.isEmpty)
        }
    }
}
