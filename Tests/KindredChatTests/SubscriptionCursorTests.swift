import KindredChat
import Testing

@Suite("Subscription cursor: each log position once, in order")
struct SubscriptionCursorTests {
    @Test func nextAnnouncedEventIsDeliveredDuplicatesSkipped() {
        var cursor = SubscriptionCursor(position: 4)
        #expect(cursor.announced(sequence: 5, carriesEvent: true) == .deliver)
        #expect(cursor.position == 5)
        #expect(cursor.announced(sequence: 5, carriesEvent: true) == .skip)
        #expect(cursor.announced(sequence: 3, carriesEvent: true) == .skip)
    }

    @Test func aGapOrAnEventTooLargeToCarryIsFetched() {
        var cursor = SubscriptionCursor(position: 4)
        #expect(cursor.announced(sequence: 7, carriesEvent: true) == .fetch(after: 4))
        #expect(cursor.position == 4)
        #expect(cursor.announced(sequence: 5, carriesEvent: false) == .fetch(after: 4))
    }

    @Test func fetchedPositionsAreHandedOutOnceInOrder() {
        var cursor = SubscriptionCursor(position: 4)
        #expect(cursor.fetched([6, 5, 4, 7]) == [5, 6, 7])
        #expect(cursor.fetched([6, 7]) == [])
        #expect(cursor.announced(sequence: 7, carriesEvent: true) == .skip)
        #expect(cursor.announced(sequence: 8, carriesEvent: true) == .deliver)
    }

    @Test func heartbeatOnlyAfterASilentInterval() {
        var cursor = SubscriptionCursor(position: 0)
        #expect(cursor.tick() == .heartbeat)
        #expect(cursor.announced(sequence: 1, carriesEvent: true) == .deliver)
        #expect(cursor.tick() == .skip)
        #expect(cursor.tick() == .heartbeat)
        cursor.wroteEphemeral()
        #expect(cursor.tick() == .skip)
        _ = cursor.fetched([2])
        #expect(cursor.tick() == .skip)
    }

    @Test func reconnectedListenFetchesFromThePosition() {
        let cursor = SubscriptionCursor(position: 9)
        #expect(cursor.resynchronize() == .fetch(after: 9))
    }

    @Test(arguments: [("c1.0", Int64(0)), ("c1.42", 42)])
    func resumeTokensRoundTrip(token: String, position: Int64) {
        #expect(ResumeToken.decode(token) == position)
        #expect(ResumeToken.encode(position) == token)
    }

    @Test(arguments: ["", "42", "c1.", "c1.-1", "c2.5", "c1.5x", "c1." + String(repeating: "9", count: 130)])
    func malformedResumeTokens(token: String) {
        #expect(ResumeToken.decode(token) == nil)
    }
}
