import KindredProto
import KindredServiceKit

/// Checks a consumer's effects against its ``EventSubscriptions`` entry: producers' relays send a consumer only the
/// types listed there, so a type its effect function applies but the table leaves out would never arrive, and a
/// type the table lists but the function ignores costs every producer a delivery for nothing.
///
/// ```swift
/// @Test func effectsAreTheSubscribedTypes() async throws {
///     try await ChatHarness.with { chat in
///         #expect(EventSubscriptionTesting.disagreements(consumer: "chat") { chat.service.effect(of: $0) } == [])
///     }
/// }
/// ```
public enum EventSubscriptionTesting {
    /// "<producer> <type>: applied, not subscribed" or "…: subscribed, not applied", for every pair of a producer
    /// `consumer`'s entry names and an event type on which `effect` (probed with ``sample(_:from:)``) and the entry
    /// disagree; also "not in EventSubscriptions" when the consumer has no entry. Empty when they agree.
    public static func disagreements(
        consumer: String, effect: (Kindred.Common.V1.Event) -> EventInbox.Effect?
    ) -> [String] {
        guard let producers = EventSubscriptions.producers(of: consumer) else {
            return ["\(consumer): not in EventSubscriptions"]
        }
        var found: [String] = []
        for producer in producers.sorted() {
            let subscribed = EventSubscriptions.types(of: consumer, from: producer) ?? []
            for type in EventType.allCases {
                let applied = effect(Self.sample(type, from: producer)) != nil
                if applied && !subscribed.contains(type) {
                    found.append("\(producer) \(type.rawValue): applied, not subscribed")
                } else if !applied && subscribed.contains(type) {
                    found.append("\(producer) \(type.rawValue): subscribed, not applied")
                }
            }
        }
        return found
    }

    /// An event of `type` from `producer`, with valid ids in its envelope and an empty payload message.
    public static func sample(_ type: EventType, from producer: String) -> Kindred.Common.V1.Event {
        var event = Kindred.Common.V1.Event()
        event.eventId = try! UUIDv7.generate()
        event.producer = producer
        event.userId = try! UUIDv7.generate()
        event.communityId = "sample"
        event.sequence = 1
        event.payload =
            switch type {
            case .accountDeactivated: .accountDeactivated(.init())
            case .accountReactivated: .accountReactivated(.init())
            case .accountDeleted: .accountDeleted(.init())
            case .profileUpdated: .profileUpdated(.init())
            case .locationChanged: .locationChanged(.init())
            case .communityUpdated: .communityUpdated(.init())
            case .swipeRecorded: .swipeRecorded(.init())
            case .swipeUndone: .swipeUndone(.init())
            case .matchCreated: .matchCreated(.init())
            case .matchEnded: .matchEnded(.init())
            case .userBlocked: .userBlocked(.init())
            case .userUnblocked: .userUnblocked(.init())
            case .reportResolved: .reportResolved(.init())
            case .activityStarted: .activityStarted(.init())
            case .messageSent: .messageSent(.init())
            }
        return event
    }
}
