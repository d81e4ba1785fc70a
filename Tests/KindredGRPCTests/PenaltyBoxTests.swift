import NIOCore
import Testing

@testable import KindredGRPC

@Suite struct PenaltyBoxTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test(arguments: [
        // Offences in a row: 1 s, doubling, capped at 60 s.
        (1, Duration.seconds(1)), (2, .seconds(2)), (3, .seconds(4)), (6, .seconds(32)), (7, .seconds(60)),
        (100, .seconds(60)),
    ])
    func penaltyGrows(offences: Int, expected: Duration) {
        var box = PenaltyBox()
        var penalty = Duration.zero
        for index in 0..<offences {
            penalty = box.recordAbuse(from: "192.0.2.1", now: Self.start + .seconds(Int64(index)))
        }
        #expect(penalty == expected)
    }

    @Test func blocksForThePenaltyOnly() {
        var box = PenaltyBox()
        box.recordAbuse(from: "192.0.2.1", now: Self.start)
        #expect(box.isBlocked("192.0.2.1", now: Self.start + .milliseconds(999)))
        #expect(!box.isBlocked("192.0.2.1", now: Self.start + .seconds(1)))
        #expect(!box.isBlocked("192.0.2.2", now: Self.start))
    }

    @Test func forgetsAfterAQuietPeriod() {
        var box = PenaltyBox()
        box.recordAbuse(from: "192.0.2.1", now: Self.start)
        box.recordAbuse(from: "192.0.2.1", now: Self.start + .seconds(1))
        // Ten quiet minutes: the next offence is a first one again.
        let penalty = box.recordAbuse(from: "192.0.2.1", now: Self.start + .seconds(602))
        #expect(penalty == .seconds(1))
    }

    @Test func tableIsBounded() {
        var configuration = PenaltyBox.Configuration()
        configuration.capacity = 100
        var box = PenaltyBox(configuration: configuration)
        for index in 0..<1000 {
            box.recordAbuse(from: "198.51.100.\(index)", now: Self.start + .milliseconds(Int64(index)))
        }
        #expect(box.count == 100)
        // The most recent offender is still blocked; the oldest made room.
        #expect(box.isBlocked("198.51.100.999", now: Self.start + .seconds(1)))
        #expect(!box.isBlocked("198.51.100.0", now: Self.start + .milliseconds(1)))
    }
}
