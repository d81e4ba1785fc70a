@testable import KindredServiceKit
import Testing

/// What a JetStream relay makes of its stream against the one its database recorded (``StreamContinuity``).
@Suite struct StreamContinuityTests {
    static let recorded = StreamMark(created: "2026-11-27T21:41:44.076261637Z", lastSequence: 120)

    @Test(arguments: [
        // Nothing recorded: taken as it is, whatever it holds.
        (nil, StreamMark(created: "2026-11-27T21:41:44.076261637Z", lastSequence: 0), StreamContinuity.unrecorded),
        // The same stream, as far as recorded or further.
        (recorded, StreamMark(created: "2026-11-27T21:41:44.076261637Z", lastSequence: 120), .continuous),
        (recorded, StreamMark(created: "2026-11-27T21:41:44.076261637Z", lastSequence: 5000), .continuous),
        // Created again (empty, or already holding new events): it lacks what was published before.
        (recorded, StreamMark(created: "2026-11-28T08:00:00.000000001Z", lastSequence: 0), .replaced),
        (recorded, StreamMark(created: "2026-11-28T08:00:00.000000001Z", lastSequence: 900), .replaced),
        // The same stream gone back (its store restored from an older copy).
        (recorded, StreamMark(created: "2026-11-27T21:41:44.076261637Z", lastSequence: 119), .rewound),
    ] as [(StreamMark?, StreamMark, StreamContinuity)])
    func continuity(recorded: StreamMark?, observed: StreamMark, expected: StreamContinuity) {
        let continuity = StreamContinuity(recorded: recorded, observed: observed)
        #expect(continuity == expected)
        #expect(continuity.republishes == (expected == .replaced || expected == .rewound))
    }
}
