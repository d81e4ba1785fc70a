/// Whether the JetStream stream a relay publishes on still holds what the relay's cursors say it published, judged
/// from what the producer's database recorded of the stream (``StreamMark``, in the publisher's `events_consumers`
/// row) and what the stream says of itself now.
///
/// The cursors of the bus's publisher (``JetStreamEventBus/relayConsumer``) say "published" for every event the
/// stream acknowledged. They live in the producer's database, the stream in NATS; when one of them is brought back
/// from another moment than the other, they disagree:
/// - the databases restored to a point in time start on a NATS cluster with empty streams (or NATS lost its store):
///   another stream (``replaced``), which lacks everything published before it existed;
/// - the stream's store restored from an older copy: the same stream with a lower last sequence than recorded
///   (``rewound``), lacking what was published since that copy.
/// Either way, events published before and not yet applied by some consumer would never be delivered: the relay
/// publishes again what its outbox still holds (``OutboxRelayStore/checkStream(publisher:observe:)``), and the
/// consumers' inboxes drop what they applied before.
enum StreamContinuity: Sendable, Hashable {
    /// Nothing recorded yet (the first start on the bus, or a database older than the record): the stream is taken
    /// as it is.
    case unrecorded
    /// The stream recorded, at or past the last sequence recorded.
    case continuous
    /// Another stream than the one recorded (created again under the same name).
    case replaced
    /// The stream recorded, but its last sequence is below one it had.
    case rewound

    init(recorded: StreamMark?, observed: StreamMark) {
        guard let recorded else {
            self = .unrecorded
            return
        }
        if recorded.created != observed.created {
            self = .replaced
        } else if observed.lastSequence < recorded.lastSequence {
            self = .rewound
        } else {
            self = .continuous
        }
    }

    /// Whether the stream lacks events the cursors say it holds: publish the outbox again.
    var republishes: Bool { self == .replaced || self == .rewound }
}

/// One stream as seen at one moment: its creation time (which tells it from a stream created again under its name)
/// and its last sequence (which never goes down in a stream's life: messages aged out keep their sequences).
struct StreamMark: Sendable, Hashable {
    var created: String
    var lastSequence: Int64
}
