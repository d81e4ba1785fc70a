import Testing

@testable import KindredNotify

@Suite("Message collapse and the push decision as values")
struct MessageCollapseTests {
    @Test func theCollapseKeyIsTheThreadsThirtyTwoHexDigits() {
        let key = MessageCollapse.key(thread: "0193A5B2-7C1D-7E3F-8A9B-0C1D2E3F4A5B")
        #expect(key == "0193a5b27c1d7e3f8a9b0c1d2e3f4a5b")
        #expect(key.utf8.count == 32)  // Web Push Topic: at most 32 characters
    }

    static func message(count: Int = 1) -> QueuedNotification {
        QueuedNotification(
            id: "n", user: "u", kind: .newMessage, subject: "s", collapseKey: "k", connection: false, attempts: 0,
            thread: "t", latestMessage: "m", itemCount: count)
    }

    @Test func anOpenAppSuppressesAMessagePushButNotAMatch() {
        let online = ChatContext(online: true, unreadMessages: 4, threadOpen: true)
        #expect(PushDecision.decide(Self.message(), preferences: .defaults, chat: online) == .suppress)
        var match = Self.message()
        match.kind = .newMatch
        guard case .send(_, let badge) = PushDecision.decide(match, preferences: .defaults, chat: online) else {
            Issue.record("a match is pushed even to an open app")
            return
        }
        #expect(badge == 4)
    }

    @Test func anEndedThreadCancelsTheMessage() {
        let ended = ChatContext(online: false, unreadMessages: 0, threadOpen: false)
        #expect(PushDecision.decide(Self.message(), preferences: .defaults, chat: ended) == .cancel)
    }

    @Test func theBodyShowsOnlyWhenTheMemberAllowsIt() {
        let chat = ChatContext(online: false, unreadMessages: 2, threadOpen: true, messageBody: "see you at 8")
        #expect(
            PushDecision.decide(Self.message(count: 3), preferences: .defaults, chat: chat)
                == .send(.init(count: 3), badge: 2))
        var shows = NotificationPreferences.defaults
        shows.showMessageText = true
        #expect(
            PushDecision.decide(Self.message(), preferences: shows, chat: chat)
                == .send(.init(messageText: "see you at 8", count: 1), badge: 2))
    }

    @Test func withoutChatThePushGoesOutPlain() {
        var shows = NotificationPreferences.defaults
        shows.showMessageText = true
        #expect(PushDecision.decide(Self.message(), preferences: shows, chat: nil) == .send(.init(count: 1), badge: nil))
    }
}
