import Testing

@testable import KindredNotify

/// ``SendWakeup`` on its own: what a sender's stream holds after wake-ups. Nothing waits on a clock: each stream is
/// finished before it is read to its end, so a count is exactly what was kept.
@Suite("The sender's wake-up")
struct SendWakeupTests {
    static func count(_ stream: AsyncStream<Void>) async -> Int {
        var count = 0
        for await _ in stream { count += 1 }
        return count
    }

    @Test func aWakeUpWithNobodyWaitingIsKeptForTheNextLook() async {
        let wakeup = SendWakeup()
        let (stream, continuation) = wakeup.subscribe()
        wakeup.wake()
        continuation.finish()
        #expect(await Self.count(stream) == 1)
    }

    @Test func wakeUpsWhileTheSenderIsBusyAreOne() async {
        let wakeup = SendWakeup()
        let (stream, continuation) = wakeup.subscribe()
        wakeup.wake()
        continuation.yield()  // the sender's own: a push ended
        wakeup.wake()
        continuation.finish()
        #expect(await Self.count(stream) == 1)
    }

    @Test func everySenderIsWoken() async {
        let wakeup = SendWakeup()
        let senders = (0..<3).map { _ in wakeup.subscribe() }
        wakeup.wake()
        for (stream, continuation) in senders {
            continuation.finish()
            #expect(await Self.count(stream) == 1)
        }
    }

    @Test func aWakeUpEndsAWait() async throws {
        let wakeup = SendWakeup()
        let (stream, _) = wakeup.subscribe()
        let waiting = Task {
            var iterator = stream.makeAsyncIterator()
            return await iterator.next() != nil
        }
        wakeup.wake()
        #expect(await waiting.value)
    }

    @Test func aFinishedSenderIsNoLongerWoken() {
        let wakeup = SendWakeup()
        let (firstStream, first) = wakeup.subscribe()
        let (secondStream, second) = wakeup.subscribe()
        #expect(wakeup.subscriberCount == 2)
        first.finish()
        #expect(wakeup.subscriberCount == 1)
        second.finish()
        #expect(wakeup.subscriberCount == 0)
        wakeup.wake()
        withExtendedLifetime((firstStream, secondStream)) {}
    }
}
