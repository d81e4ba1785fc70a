import Foundation
import KindredChat
import KindredGRPC
import KindredProto
import KindredServiceKit
import Testing

@Suite("Chat messages against a real PostgreSQL", .serialized)
struct MessageTests {
    @Test func matchCreatedOpensOneThreadForBothAndRedeliveryChangesNothing() async throws {
        try await ChatHarness.with { chat in
            let (alice, bob) = (try await chat.user("alice"), try await chat.user("bob"))
            let event = chat.matchCreated(alice, bob)
            var withID = event
            withID.eventId = try UUIDv7.generate()
            let first = try await chat.deliver([withID], from: "match")
            let again = try await chat.deliver([withID], from: "match")
            #expect(first == [withID.eventId] && again == [withID.eventId])
            // Another event for the same match (a producer retry with a new id) does not open it twice either.
            try await chat.deliver([event], from: "match")
            for (user, other) in [(alice, bob), (bob, alice)] {
                let threads = try await chat.threads(user)
                #expect(threads.count == 1)
                #expect(threads.first?.otherUserId == other.id)
                #expect(threads.first?.state == .open)
            }
            let notices = try await chat.database.query("SELECT count(*) FROM stream_events").scalar(Int.self)
            #expect(notices == 2)
        }
    }

    @Test func sequencesStrictlyIncreaseWithoutGapsUnderConcurrentSenders() async throws {
        try await ChatHarness.with { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            let answered = try await withThrowingTaskGroup(of: Chat.ChatMessage?.self) { group in
                for index in 0..<40 {
                    group.addTask {
                        try await chat.send(index.isMultiple(of: 2) ? alice : bob, thread, "message \(index)").message
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let all = try await chat.history(alice, thread, size: 100).messages
            #expect(all.map(\.sequence) == Array((1...40).reversed()))
            // Each sender was answered with the message as stored.
            #expect(answered.compactMap { $0 }.sorted { $0.sequence > $1.sequence } == all)
            #expect(zip(all, all.dropFirst()).allSatisfy { $0.sentUnixMs >= $1.sentUnixMs })
        }
    }

    @Test func sameClientIDReturnsTheOriginalAndOtherContentIsRefused() async throws {
        try await ChatHarness.with { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            let other = try await chat.thread(alice, try await chat.user())
            let first = try await chat.send(alice, thread, "hello", id: "retry-1")
            let retry = try await chat.send(alice, thread, "  hello \n", id: "retry-1")
            #expect(!first.replayed && retry.replayed)
            #expect(retry.message == first.message)
            await expectRPCError(.alreadyExists, reason: "CLIENT_MESSAGE_ID_REUSED") {
                try await chat.send(alice, thread, "something else", id: "retry-1")
            }
            await expectRPCError(.alreadyExists, reason: "CLIENT_MESSAGE_ID_REUSED") {
                try await chat.send(alice, other, "hello", id: "retry-1")
            }
            // Client ids are per sender: bob may use the same one.
            #expect(try await chat.send(bob, thread, "hello", id: "retry-1").replayed == false)
            #expect(try await chat.history(alice, thread).messages.count == 2)
        }
    }

    @Test func concurrentRetriesOfOneMessageStoreItOnce() async throws {
        try await ChatHarness.with { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            let answers = try await withThrowingTaskGroup(of: Chat.SendMessageResponse.self) { group in
                for _ in 0..<8 { group.addTask { try await chat.send(alice, thread, "once", id: "same") } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(answers.map(\.message)).count == 1)
            #expect(answers.filter { !$0.replayed }.count == 1)
            #expect(try await chat.history(bob, thread).messages.count == 1)
        }
    }

    @Test func invalidInputIsRefusedAndStoresNothing() async throws {
        try await ChatHarness.with { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            await expectRPCError(.invalidArgument, reason: "BODY_CONTROL_CHARACTER") {
                try await chat.send(alice, thread, "bell\u{07}")
            }
            await expectRPCError(.invalidArgument, reason: "BODY_TOO_LONG") {
                try await chat.send(alice, thread, String(repeating: "x", count: 2001))
            }
            await expectRPCError(.invalidArgument, reason: "INVALID_CLIENT_MESSAGE_ID") {
                try await chat.send(alice, thread, "fine", id: "not ok")
            }
            await expectRPCError(.invalidArgument, reason: "INVALID_ID") { try await chat.send(alice, "nope", "fine") }
            await expectRPCError(.unauthenticated) {
                var request = Chat.SendMessageRequest()
                request.threadId = thread
                request.clientMessageId = "x"
                request.body = "no token"
                _ = try await chat.client.unary(ChatMethod.sendMessage, request)
            }
            #expect(try await chat.history(alice, thread).messages.isEmpty)
        }
    }

    @Test func historyPagesBothWaysFromAnyPoint() async throws {
        try await ChatHarness.with { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            for index in 1...7 { try await chat.send(index.isMultiple(of: 2) ? bob : alice, thread, "m\(index)") }
            var older: [Int64] = []
            var token = ""
            repeat {
                let page = try await chat.history(alice, thread, size: 3, token: token)
                older += page.messages.map(\.sequence)
                token = page.nextPageToken
            } while !token.isEmpty
            #expect(older == [7, 6, 5, 4, 3, 2, 1])
            var newer: [Int64] = []
            repeat {
                let page = try await chat.history(bob, thread, size: 2, token: token, newer: true, from: 2)
                newer += page.messages.map(\.sequence)
                token = page.nextPageToken
            } while !token.isEmpty
            #expect(newer == [3, 4, 5, 6, 7])
            #expect(try await chat.history(alice, thread, size: 2, from: 5).messages.map(\.sequence) == [4, 3])
            // A token is bound to its caller, thread and direction.
            let page = try await chat.history(alice, thread, size: 2)
            await expectRPCError(.invalidArgument, reason: "PAGE_TOKEN_INVALID") {
                _ = try await chat.history(bob, thread, size: 2, token: page.nextPageToken)
            }
            await expectRPCError(.invalidArgument, reason: "PAGE_TOKEN_INVALID") {
                _ = try await chat.history(alice, thread, size: 2, token: page.nextPageToken, newer: true)
            }
        }
    }

    /// The hourly limit counts in the sender's row per clock hour: this hour's sends, plus the previous hour's times
    /// the part of that hour still within the last 60 minutes; an older hour counts nothing, a retry counts once.
    /// (A clock hour that ends while the test runs could change the answers: a window of about a second an hour.)
    @Test func theHourlyLimitCountsThisHourAndThePreviousHoursShareOfTheLast60Minutes() async throws {
        try await ChatHarness.with(settings: ["KINDRED_CHAT_DEFAULT_HOURLY_MESSAGE_LIMIT": "3"]) { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            func counts() async throws -> [Int] {
                let row = try await chat.database.query(
                    """
                    SELECT sent_in_hour, sent_in_previous_hour, (sent_hour = date_trunc('hour', now()))::int
                    FROM users WHERE user_id = \(alice.id)::uuid
                    """
                ).first!
                return [try row.decode(Int.self, at: 0), try row.decode(Int.self, at: 1), try row.decode(Int.self, at: 2)]
            }
            func set(hoursAgo: Int, inHour: Int, inPreviousHour: Int) async throws {
                try await chat.database.execute(
                    """
                    UPDATE users SET sent_hour = date_trunc('hour', now()) - \(hoursAgo) * interval '1 hour',
                                     sent_in_hour = \(inHour), sent_in_previous_hour = \(inPreviousHour)
                    WHERE user_id = \(alice.id)::uuid
                    """
                )
            }
            _ = try await chat.send(alice, thread, "first", id: "first")
            _ = try await chat.send(alice, thread, "first", id: "first")  // a retry: answered, not counted
            #expect(try await counts() == [1, 0, 1])
            // The previous hour's sends, weighed by the part of it within the last 60 minutes: far over the limit.
            try await set(hoursAgo: 1, inHour: 1_000_000, inPreviousHour: 0)
            _ = await expectRPCError(.resourceExhausted, reason: "RATE_LIMITED") {
                _ = try await chat.send(alice, thread, "refused")
            }
            // Two hours ago counts nothing: the send goes, and this hour's count starts at one.
            try await set(hoursAgo: 2, inHour: 1_000_000, inPreviousHour: 5)
            _ = try await chat.send(alice, thread, "second")
            #expect(try await counts() == [1, 0, 1])
            // The hour turned since the last send: its count becomes the previous hour's.
            try await set(hoursAgo: 1, inHour: 1, inPreviousHour: 9)
            _ = try await chat.send(alice, thread, "third")
            #expect(try await counts() == [1, 1, 1])
            // This hour: two sent, the third goes, the fourth is refused.
            try await set(hoursAgo: 0, inHour: 2, inPreviousHour: 0)
            _ = try await chat.send(alice, thread, "fourth")
            _ = await expectRPCError(.resourceExhausted, reason: "RATE_LIMITED") {
                _ = try await chat.send(alice, thread, "fifth")
            }
            #expect(try await counts() == [3, 0, 1])
            let bodies = try await chat.history(alice, thread).messages.sorted { $0.sequence < $1.sequence }.map(\.body)
            #expect(bodies == ["first", "second", "third", "fourth"])
        }
    }

    @Test func hourlyLimitOfTheCommunityApplies() async throws {
        try await ChatHarness.with { chat in
            let (alice, bob) = (try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            var event = Kindred.Common.V1.Event()
            event.communityId = chat.community
            var community = Kindred.Common.V1.Community()
            community.communityId = chat.community
            community.version = 2
            var settings = Kindred.Common.V1.CommunitySettings()
            settings.hourlyMessageLimit = 3
            community.settings = settings
            event.payload = .communityUpdated(.with { $0.community = community })
            try await chat.deliver([event], from: "profile")
            // An older version does not undo it.
            community.version = 1
            settings.hourlyMessageLimit = 1000
            community.settings = settings
            event.payload = .communityUpdated(.with { $0.community = community })
            event.eventId = ""
            try await chat.deliver([event], from: "profile")
            for index in 1...3 { try await chat.send(alice, thread, "m\(index)") }
            let error = await expectRPCError(.resourceExhausted, reason: "RATE_LIMITED") {
                try await chat.send(alice, thread, "one too many")
            }
            #expect((error?.errorDetail?.retryAfterMs ?? 0) > 0)
            // Per sender: bob still may.
            try await chat.send(bob, thread, "reply")
            #expect(try await chat.history(alice, thread).messages.count == 4)
        }
    }

    @Test func onlyParticipantsTouchAThread() async throws {
        try await ChatHarness.with { chat in
            let (alice, bob, eve) = (try await chat.user(), try await chat.user(), try await chat.user())
            let thread = try await chat.thread(alice, bob)
            let message = try await chat.send(alice, thread, "private").message!
            await expectRPCError(.notFound) { try await chat.send(eve, thread, "let me in") }
            await expectRPCError(.notFound) { _ = try await chat.history(eve, thread) }
            await expectRPCError(.notFound) {
                _ = try await chat.client.unary(
                    ChatMethod.markRead, .with { $0.threadId = thread; $0.upToMessageId = message.messageId },
                    metadata: eve.metadata)
            }
            await expectRPCError(.notFound) {
                _ = try await chat.client.unary(
                    ChatMethod.markDelivered, .with { $0.threadId = thread; $0.upToMessageId = message.messageId },
                    metadata: eve.metadata)
            }
            await expectRPCError(.notFound) {
                _ = try await chat.client.unary(ChatMethod.sendTyping, .with { $0.threadId = thread }, metadata: eve.metadata)
            }
            let summaries = try await chat.client.unary(
                ChatMethod.getThreadSummaries, .with { $0.threadIds = [thread] }, metadata: eve.metadata)
            #expect(summaries.threads.isEmpty)
            await expectRPCError(.permissionDenied) {
                _ = try await chat.client.unary(
                    ChatMethod.getUnreadCount, .with { $0.viewerUserId = alice.id }, metadata: eve.metadata)
            }
            // Users cannot pose as services or admins.
            await expectRPCError(.permissionDenied) {
                var request = Kindred.Common.V1.DeliverEventsRequest()
                request.events = [chat.matchCreated(eve, alice)]
                _ = try await chat.client.unary(ChatMethod.deliverEvents, request, metadata: eve.metadata)
            }
            await expectRPCError(.permissionDenied) {
                _ = try await chat.client.unary(
                    ChatMethod.closeThread, .with { $0.threadId = thread }, metadata: eve.metadata)
            }
            await expectRPCError(.permissionDenied) {
                _ = try await chat.client.unary(
                    ChatMethod.getMessages, .with { $0.messageIds = [message.messageId] }, metadata: eve.metadata)
            }
            #expect(try await chat.history(bob, thread).messages.count == 1)
        }
    }

    /// Report evidence: an admin reads messages by id; with `between_user_ids` only the two users' own thread's
    /// messages come back (never the reported member's conversations with others); everyone else is refused.
    @Test func adminsReadEvidenceOnlyBetweenTheTwoUsersWhenAsked() async throws {
        try await ChatHarness.with { chat in
            let (alice, bob, carol) = (try await chat.user("alice"), try await chat.user("bob"), try await chat.user("carol"))
            let admin = try await chat.user("admin", admin: true)
            let withAlice = try await chat.thread(alice, bob)
            let withCarol = try await chat.thread(bob, carol)
            let toAlice = try #require(try await chat.send(bob, withAlice, "to alice").message)
            let toCarol = try #require(try await chat.send(bob, withCarol, "to carol").message)
            let ids = [toCarol.messageId, toAlice.messageId, try UUIDv7.generate()]
            let all = try await chat.client.unary(
                ChatMethod.getMessages, .with { $0.messageIds = ids }, metadata: admin.metadata)
            #expect(all.messages.map(\.body) == ["to carol", "to alice"], "request order, unknown ids omitted")
            for pair in [[alice.id, bob.id], [bob.id.uppercased(), alice.id]] {
                let between = try await chat.client.unary(
                    ChatMethod.getMessages, .with { $0.messageIds = ids; $0.betweenUserIds = pair }, metadata: admin.metadata)
                #expect(between.messages.map(\.body) == ["to alice"])
            }
            await expectRPCError(.invalidArgument) {
                _ = try await chat.client.unary(
                    ChatMethod.getMessages, .with { $0.messageIds = ids; $0.betweenUserIds = [alice.id] },
                    metadata: admin.metadata)
            }
            await expectRPCError(.permissionDenied) {
                _ = try await chat.client.unary(
                    ChatMethod.getMessages, .with { $0.messageIds = ids; $0.betweenUserIds = [alice.id, bob.id] },
                    metadata: alice.metadata)
            }
        }
    }
}
