/// Which events each consuming service applies, per producer: the one table both sides read.
///
/// - A producer's relay registers each consumer with its types (`events_consumers.event_types`); an append marks
///   pending only the cursors of consumers that apply the event's type, and the relay reads only those types. A
///   consumer is not woken, claimed for, called or sent anything it would ignore: a swipe no longer costs chat and
///   profile a claim, a read, a call, a transaction and a cursor write each.
/// - A consumer takes its producers from here (``producers(of:)``), and a test of each consumer checks that its
///   events' effects (`EventInbox.process(_:from:effect:)`) are exactly the types listed here, producer by
///   producer (`EventSubscriptionTesting`), so the table cannot drift from what the handlers do.
///
/// A consumer that is not listed (discovery and notify apply nearly everything they receive; tests' sinks) gets
/// every event of the producers that name it. A consumer that starts applying a new type receives it from the
/// time its producer's relay registered the new table; earlier events of that type are not sent again.
public enum EventSubscriptions {
    /// Consumer service → producer → the event types it applies from that producer.
    static let table: [String: [String: Set<EventType>]] = [
        "auth": ["profile": [.communityUpdated]],
        // Chat erases on every producer's AccountDeleted: profile and match re-announce a deletion after erasing
        // their outboxes, so a thread opened from an event that overtook auth's is closed again.
        "chat": Self.each(
            ["auth", "profile", "match"],
            [
                .matchCreated, .matchEnded, .userBlocked, .accountDeactivated, .accountReactivated, .accountDeleted,
                .communityUpdated,
            ]),
        "match": Self.each(
            ["auth", "profile"],
            [
                .accountDeactivated, .accountReactivated, .accountDeleted, .profileUpdated, .locationChanged,
                .communityUpdated,
            ]),
        "profile": [
            "auth": [.accountDeactivated, .accountReactivated, .accountDeleted],
            "match": [.accountDeleted, .userBlocked, .userUnblocked, .matchCreated, .matchEnded],
        ],
    ]

    /// The producers whose events `consumer` applies; nil for a consumer not in the table.
    public static func producers(of consumer: String) -> Set<String>? {
        Self.table[consumer].map { Set($0.keys) }
    }

    /// The types `consumer` (a service name: `EventConsumer.service`) applies from `producer`; nil (everything)
    /// for a consumer not in the table, empty for a producer it does not consume.
    public static func types(of consumer: String, from producer: String) -> Set<EventType>? {
        guard let producers = Self.table[consumer] else { return nil }
        return producers[producer] ?? []
    }

    private static func each(_ producers: [String], _ types: Set<EventType>) -> [String: Set<EventType>] {
        Dictionary(uniqueKeysWithValues: producers.map { ($0, types) })
    }
}
