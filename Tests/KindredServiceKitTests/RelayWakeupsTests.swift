import Testing

@testable import KindredServiceKit

/// A notification wakes one delivery loop per consumer, an idle one first; the poll wakes them all.
@Suite struct RelayWakeupsTests {
    @Test func aNotificationWakesOneLoopPerConsumerInTurn() {
        let wakeups = RelayWakeups(consumers: 3, loopsPerConsumer: 4)
        #expect(wakeups.wakeOnePerConsumer() == [0, 4, 8])
        #expect(wakeups.wakeOnePerConsumer() == [1, 5, 9])
        #expect(wakeups.wakeOnePerConsumer() == [2, 6, 10])
        #expect(wakeups.wakeOnePerConsumer() == [3, 7, 11])
        #expect(wakeups.wakeOnePerConsumer() == [0, 4, 8])
    }

    @Test func anIdleLoopIsWokenBeforeABusyOne() {
        let wakeups = RelayWakeups(consumers: 2, loopsPerConsumer: 3)
        for loop in [0, 1, 3] { wakeups.setBusy(loop, true) }
        #expect(wakeups.wakeOnePerConsumer() == [2, 4])
        wakeups.setBusy(2, true)
        wakeups.setBusy(4, true)
        // Consumer 0: every loop busy, so the next in turn (it claims again once its batch is done).
        #expect(wakeups.wakeOnePerConsumer() == [0, 5])
        wakeups.setBusy(1, false)
        #expect(wakeups.wakeOnePerConsumer()[0] == 1)
    }

    @Test func aWakeUpReachesTheLoopItNamesAndOnlyThat() async {
        let wakeups = RelayWakeups(consumers: 1, loopsPerConsumer: 2)
        let woken = wakeups.wakeOnePerConsumer()
        wakeups.finish()
        var counts: [Int] = []
        for stream in wakeups.streams {
            var count = 0
            for await _ in stream { count += 1 }
            counts.append(count)
        }
        #expect(woken == [0])
        #expect(counts == [1, 0])
    }

    @Test func thePollWakesEveryLoop() async {
        let wakeups = RelayWakeups(consumers: 2, loopsPerConsumer: 2)
        wakeups.wakeAll()
        wakeups.finish()
        var counts: [Int] = []
        for stream in wakeups.streams {
            var count = 0
            for await _ in stream { count += 1 }
            counts.append(count)
        }
        #expect(counts == [1, 1, 1, 1])
    }
}
