import Testing

@testable import KindredNotify

/// ``SendWakeup`` on its own. Each wait below has an hour's timeout, so a wait that returns at all returned for the
/// reason the test gives.
@Suite("The sender's wake-up")
struct SendWakeupTests {
    @Test func aWakeUpWithNobodyWaitingIsKeptForTheNextWait() async {
        let wakeup = SendWakeup()
        wakeup.wake()
        await wakeup.wait(upTo: .seconds(3600))
        #expect(!wakeup.isWaiting)
    }

    @Test func aWakeUpEndsAWait() async throws {
        let wakeup = SendWakeup()
        let waiting = Task { await wakeup.wait(upTo: .seconds(3600)) }
        while !wakeup.isWaiting { try await Task.sleep(for: .milliseconds(5)) }
        wakeup.wake()
        await waiting.value
        #expect(!wakeup.isWaiting)
    }

    @Test func cancellationEndsAWait() async throws {
        let wakeup = SendWakeup()
        let waiting = Task { await wakeup.wait(upTo: .seconds(3600)) }
        while !wakeup.isWaiting { try await Task.sleep(for: .milliseconds(5)) }
        waiting.cancel()
        await waiting.value
    }

    @Test func theTimeoutEndsAWait() async {
        await SendWakeup().wait(upTo: .milliseconds(20))
    }

    @Test func aWakeUpEndsEveryWaitInProgress() async throws {
        let wakeup = SendWakeup()
        let waits = (0..<2).map { _ in Task { await wakeup.wait(upTo: .seconds(3600)) } }
        while !wakeup.isWaiting { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(50))  // the second wait, if it is not in yet, takes the kept wake-up
        wakeup.wake()
        for wait in waits { await wait.value }
    }
}
