import KindredProto

/// The kind of an event, without its content: what `events_outbox.event_type` stores, what the JetStream subjects
/// end in and what ``EventSubscriptions`` routes by. The raw value is "<aggregate>.<past tense>", for operators
/// reading the outbox.
public enum EventType: String, CaseIterable, Sendable, Hashable {
    case accountDeactivated = "account.deactivated"
    case accountReactivated = "account.reactivated"
    case accountDeleted = "account.deleted"
    case profileUpdated = "profile.updated"
    case locationChanged = "profile.location_changed"
    case communityUpdated = "community.updated"
    case swipeRecorded = "swipe.recorded"
    case swipeUndone = "swipe.undone"
    case matchCreated = "match.created"
    case matchEnded = "match.ended"
    case userBlocked = "user.blocked"
    case userUnblocked = "user.unblocked"
    case reportResolved = "report.resolved"
    case activityStarted = "activity.started"
    case messageSent = "message.sent"
}

extension Kindred.Common.V1.Event.Payload {
    public var type: EventType {
        switch self {
        case .accountDeactivated: .accountDeactivated
        case .accountReactivated: .accountReactivated
        case .accountDeleted: .accountDeleted
        case .profileUpdated: .profileUpdated
        case .locationChanged: .locationChanged
        case .communityUpdated: .communityUpdated
        case .swipeRecorded: .swipeRecorded
        case .swipeUndone: .swipeUndone
        case .matchCreated: .matchCreated
        case .matchEnded: .matchEnded
        case .userBlocked: .userBlocked
        case .userUnblocked: .userUnblocked
        case .reportResolved: .reportResolved
        case .activityStarted: .activityStarted
        case .messageSent: .messageSent
        }
    }

    /// The `event_type` column: ``EventType``'s raw value.
    public var typeName: String { self.type.rawValue }
}
