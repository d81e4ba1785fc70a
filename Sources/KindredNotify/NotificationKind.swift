/// What a notification is about (`notifications.kind`); each is a setting a member can turn off.
enum NotificationKind: String, Sendable, Hashable, CaseIterable {
    case newMatch = "new_match"
    case newMessage = "new_message"
    case likes
    case reportOutcome = "report_outcome"
    /// A member the recipient follows started an activity ("working out now").
    case activity

    /// Whether `preferences` let this kind through at all (quiet hours are decided when it is sent).
    func isWanted(by preferences: NotificationPreferences) -> Bool {
        switch self {
        case .newMatch: preferences.newMatch
        case .newMessage: preferences.newMessage
        case .likes: preferences.likesReceived
        case .reportOutcome: preferences.reportOutcome
        case .activity: preferences.activities
        }
    }
}
