/// Where events live on JetStream, as pure functions (every producer and consumer computes the same names):
///
/// - one stream per producer, `KINDRED_<PRODUCER>`, on the subjects `kindred.<producer>.>`;
/// - an event's subject `kindred.<producer>.<partition>.<event type>`, the partition being the outbox's partition
///   key (the member, or the community) hashed into ``partitions`` (FNV-1a, so it never changes between builds);
/// - per consumer, one durable pull consumer per producer and partition, `<consumer>-<partition>` on the
///   producer's stream, filtered on `kindred.<producer>.<partition>.>` with one message pending at most: the
///   events of one member reach the consumer in the order they were committed, whichever replica pulls them.
public enum EventBusLayout {
    /// Partitions per producer. Changing it renames every subject: a bus is started with one count for good.
    public static let partitions = 8

    public static func stream(producer: String) -> String { "KINDRED_" + producer.uppercased() }

    public static func subjects(producer: String) -> String { "kindred.\(producer).>" }

    /// The partition (0..<``partitions``) of a partition key.
    public static func partition(of key: String) -> Int {
        var hash: UInt32 = 2_166_136_261
        for byte in key.utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 16_777_619
        }
        return Int(hash % UInt32(Self.partitions))
    }

    public static func subject(producer: String, partitionKey: String, eventType: String) -> String {
        "kindred.\(producer).\(Self.partition(of: partitionKey)).\(eventType)"
    }

    public static func filter(producer: String, partition: Int) -> String { "kindred.\(producer).\(partition).>" }

    public static func durable(consumer: String, partition: Int) -> String { "\(consumer)-\(partition)" }
}
