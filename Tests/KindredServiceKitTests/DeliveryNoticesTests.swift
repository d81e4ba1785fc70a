import KindredServiceKit
import Testing

/// "At once" is checked against a bound of 60 s for a wait of at most 120 s: a parallel run of every suite on two
/// cores can starve a waiting task for seconds, and a wait that was never woken still fails the bound.
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
        let clock = ContinuousClock()
        let started = clock.now
        async let waited: Void = notices.wait(watch, atMost: .seconds(120))
        try? await Task.sleep(for: .milliseconds(50))
        notices.answered(partitions: ["user-1"])
        await waited
        #expect(clock.now - started < .seconds(60))
    }

    /// An answer recorded between the waiter's read of the cursors and its wait is kept for the wait.
    @Test func anAnswerBeforeTheWaitIsNotLost() async {
        let notices = Self.notices()
        let watch = notices.watch("user-1")
        defer { notices.end(watch) }
        notices.answered(partitions: ["user-1"])
        let clock = ContinuousClock()
        let started = clock.now
        await notices.wait(watch, atMost: .seconds(120))
        #expect(clock.now - started < .seconds(60))
        // Consumed: the next wait lasts until its bound.
        let again = clock.now
        await notices.wait(watch, atMost: .milliseconds(100))
        #expect(clock.now - again >= .milliseconds(100))
    }

    @Test func otherPartitionsDoNotWakeIt() async {
        let notices = Self.notices()
        let watch = notices.watch("user-1")
        defer { notices.end(watch) }
        notices.answered(partitions: ["user-2", "user-3"])
        let clock = ContinuousClock()
        let started = clock.now
        await notices.wait(watch, atMost: .milliseconds(100))
        #expect(clock.now - started >= .milliseconds(100))
    }

    @Test func cancellingTheWaiterEndsTheWait() async {
        let notices = Self.notices()
        let watch = notices.watch("user-1")
        defer { notices.end(watch) }
        let clock = ContinuousClock()
        let started = clock.now
        let waiter = Task { await notices.wait(watch, atMost: .seconds(120)) }
        try? await Task.sleep(for: .milliseconds(50))
        waiter.cancel()
        await waiter.value
        #expect(clock.now - started < .seconds(60))
    }
}
