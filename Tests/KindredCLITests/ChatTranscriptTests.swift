import KindredProto
import Testing

@testable import KindredCLI

/// What `kindred chat` prints, without a gateway: messages are sequences, steps are "printed 1 2; catch up after 2".
@Suite struct ChatTranscriptTests {
    static func message(_ sequence: Int64) -> Kindred.Api.V1.ChatMessage {
        .with {
            $0.sequence = sequence
            $0.body = "m\(sequence)"
        }
    }

    static func messages(_ sequences: [Int64]) -> [Kindred.Api.V1.ChatMessage] { sequences.map(Self.message) }

    static func describe(_ step: ChatTranscript.Step) -> String {
        var parts: [String] = []
        if !step.print.isEmpty { parts.append("print " + step.print.map { "\($0.sequence)" }.joined(separator: " ")) }
        if let after = step.catchUpAfter { parts.append("catch up after \(after)") }
        return parts.joined(separator: "; ")
    }

    @Test func historyIsPrintedOldestFirstAndLiveMessagesFollowOnce() {
        var transcript = ChatTranscript()
        #expect(Self.describe(transcript.history(Self.messages([3, 2, 1]))) == "print 1 2 3")
        #expect(Self.describe(transcript.received(Self.message(3))) == "")
        #expect(Self.describe(transcript.received(Self.message(4))) == "print 4")
        // Our own message comes back on the stream after SendMessage answered with it.
        #expect(Self.describe(transcript.received(Self.message(4))) == "")
    }

    /// The bug: a message sent after History was read and before Subscribe was registered is on neither. The
    /// stream's first event (a heartbeat, a receipt, anything) says it is registered: catch up once.
    @Test func aMessageSentBetweenHistoryAndSubscribeIsCaughtUpWhenTheStreamIsLive() {
        var transcript = ChatTranscript()
        #expect(Self.describe(transcript.history(Self.messages([1]))) == "print 1")
        #expect(Self.describe(transcript.streamDeliveredEvent()) == "catch up after 1")
        #expect(Self.describe(transcript.caughtUp(Self.messages([2]))) == "print 2")
        #expect(Self.describe(transcript.streamDeliveredEvent()) == "")
        #expect(Self.describe(transcript.received(Self.message(3))) == "print 3")
    }

    @Test func aGapInTheSequenceIsCaughtUpBeforeWhatFollowsIt() {
        var transcript = ChatTranscript()
        _ = transcript.history(Self.messages([1]))
        _ = transcript.streamDeliveredEvent()
        _ = transcript.caughtUp([])
        // 2 was missed: 3 waits for the catch-up, which brings both, in order; a 4 arriving meanwhile waits too.
        #expect(Self.describe(transcript.received(Self.message(3))) == "catch up after 1")
        #expect(Self.describe(transcript.received(Self.message(4))) == "")
        #expect(Self.describe(transcript.caughtUp(Self.messages([2, 3]))) == "print 2 3 4")
        #expect(transcript.lastSequence == 4)
    }

    @Test func aCatchUpThatEndsBeforeAMessageSeenLaterAsksAgain() {
        var transcript = ChatTranscript()
        _ = transcript.history(Self.messages([1]))
        #expect(Self.describe(transcript.streamDeliveredEvent()) == "catch up after 1")
        // 5 arrives while the catch-up (answered up to 2) is under way: 3 and 4 are still to fetch.
        #expect(Self.describe(transcript.received(Self.message(5))) == "")
        #expect(Self.describe(transcript.caughtUp(Self.messages([2]))) == "print 2; catch up after 2")
        #expect(Self.describe(transcript.caughtUp(Self.messages([3, 4, 5]))) == "print 3 4 5")
    }

    @Test func liveMessagesBeforeTheHistoryWaitForIt() {
        var transcript = ChatTranscript()
        // The stream came up first and brought 4 and 5; the history (read after) ends at 4.
        #expect(Self.describe(transcript.streamDeliveredEvent()) == "")
        #expect(Self.describe(transcript.received(Self.message(4))) == "")
        #expect(Self.describe(transcript.received(Self.message(5))) == "")
        // History read before the stream was registered may have missed messages: catch up once anyway.
        #expect(Self.describe(transcript.history(Self.messages([4, 3]))) == "print 3 4 5; catch up after 5")
        #expect(Self.describe(transcript.caughtUp([])) == "")
    }

    @Test func erasedMessagesDoNotHoldTheTranscript() {
        var transcript = ChatTranscript()
        _ = transcript.history(Self.messages([1]))
        _ = transcript.streamDeliveredEvent()
        _ = transcript.caughtUp([])
        #expect(Self.describe(transcript.received(Self.message(4))) == "catch up after 1")
        // 2 and 3 are gone (erased with an account): the server's answer is what exists.
        #expect(Self.describe(transcript.caughtUp(Self.messages([4]))) == "print 4")
        #expect(Self.describe(transcript.received(Self.message(5))) == "print 5")
    }
}
