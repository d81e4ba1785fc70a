import KindredServiceKit
import Testing

/// "At once" is checked by what ended the wait (a notice, not its bound of 120 s), never by the clock: a parallel
/// run of every suite on two cores can starve a waiting task for seconds.
@Suite struct DeliveryNoticesTests {
    /// A fresh producer name per test: the notices are shared per producer in the process.
    static func notices() -> DeliveryNotices { .of(producer: "test-\(UInt64.random(in: 0...UInt64.max))") }

    @Test func theSameProducerSharesOneInstance() {
        #expect(DeliveryNotices.of(producer: "shared-test") === DeliveryNotices.of(producer: "shared-test"))
        #expect(DeliveryNotices.of(producer: "shared-test") !== DeliveryNotices.of(producer: "other-test"))
    }

    @Test func anAnswerWakesTheWaiterAtOnce() async {
        let notices = Self.notices()
        let watch = notices.watch("user-1")
        defer { notices.end(watch) }
        async let waited = notices.wait(watch, atMost: .seconds(120))
        // Whether the waiter is already waiting or not yet: the notice wakes it or is kept for it.
        try? await Task.sleep(for: .milliseconds(50))
        notices.answered(partitions: ["user-1"])
        #expect(await waited == .notice)
    }

    /// An answer recorded between the waiter's read of the cursors and its wait is kept for the wait.
    @Test func anAnswerBeforeTheWaitIsNotLost() async {
        let notices = Self.notices()
        let watch = notices.watch("user-1")
        defer { notices.end(watch) }
        notices.answered(partitions: ["user-1"])
        #expect(await notices.wait(watch, atMost: .seconds(120)) == .notice)
        // Consumed: the next wait lasts until its bound.
        let clock = ContinuousClock()
        let again = clock.now
        #expect(await notices.wait(watch, atMost: .milliseconds(100)) == .timeout)
        #expect(clock.now - again >= .milliseconds(100))
    }

    @Test func otherPartitionsDoNotWakeIt() async {
        let notices = Self.notices()
        let watch = notices.watch("user-1")
        defer { notices.end(watch) }
        notices.answered(partitions: ["user-2", "user-3"])
        let clock = ContinuousClock()
        let started = clock.now
        #expect(await notices.wait(watch, atMost: .milliseconds(100)) == .timeout)
        #expect(clock.now - started >= .milliseconds(100))
    }

    @Test func cancellingTheWaiterEndsTheWait() async {
        let notices = Self.notices()
        let watch = notices.watch("user-1")
        defer { notices.end(watch) }
        let waiter = Task { await notices.wait(watch, atMost: .seconds(120)) }
        try? await Task.sleep(for: .milliseconds(50))
        waiter.cancel()
        #expect(await waiter.value == .cancelled)
    }
}
