import Foundation
import KindredProto

/// A member's notification settings as stored (`settings`), with the defaults that apply until they change
/// them, and the quiet-hours rule. Pure: `NotificationPreferencesTests` walks it without I/O.
struct NotificationPreferences: Sendable, Hashable {
    var newMatch = true
    var newMessage = true
    var likesReceived = true
    var reportOutcome = true
    /// Activity broadcasts of members the member follows (follow communities).
    var activities = true
    var quietHours = QuietHoursRule()
    /// IANA name; empty = the most recently registered device's zone.
    var timeZone = ""
    /// Message text on the lock screen: off until the member turns it on ("New message from Alex").
    var showMessageText = false

    struct QuietHoursRule: Sendable, Hashable {
        var enabled = false
        /// Minutes after local midnight.
        var startMinute = 22 * 60
        var endMinute = 7 * 60
        var allowMatches = false

        /// Whether `minute` (after local midnight) falls in the quiet span; a span whose end is before its start
        /// runs over midnight; start == end is empty.
        func contains(minute: Int) -> Bool {
            guard self.enabled, self.startMinute != self.endMinute else { return false }
            if self.startMinute < self.endMinute { return minute >= self.startMinute && minute < self.endMinute }
            return minute >= self.startMinute || minute < self.endMinute
        }
    }

    static let defaults = NotificationPreferences()

    /// Whether `instant` is within quiet hours in `zone` (the settings' zone, or the device's when empty).
    func isQuiet(at instant: Date, deviceTimeZone: String) -> Bool {
        let name = self.timeZone.isEmpty ? deviceTimeZone : self.timeZone
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: name) ?? TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.hour, .minute], from: instant)
        return self.quietHours.contains(minute: (parts.hour ?? 0) * 60 + (parts.minute ?? 0))
    }

    /// Checks an UpdateNotificationSettings request (all fields replaced): INVALID_ARGUMENT naming the field.
    static func validate(_ settings: Kindred.Notify.V1.NotificationSettings) throws(NotifyError) -> Self {
        var preferences = NotificationPreferences()
        preferences.newMatch = settings.newMatch
        preferences.newMessage = settings.newMessage
        preferences.likesReceived = settings.likesReceived
        preferences.reportOutcome = settings.reportOutcome
        preferences.activities = settings.activities
        preferences.showMessageText = settings.showMessageText
        let quiet = settings.quietHours ?? .init()
        for (field, minute) in [("quiet_hours.start_minute", quiet.startMinute), ("quiet_hours.end_minute", quiet.endMinute)]
        where !(0...1439).contains(minute) {
            throw .invalid(field, "OUT_OF_RANGE", "minutes after midnight, 0..1439")
        }
        preferences.quietHours = QuietHoursRule(
            enabled: quiet.enabled, startMinute: Int(quiet.startMinute), endMinute: Int(quiet.endMinute),
            allowMatches: quiet.allowMatches)
        preferences.timeZone =
            settings.timeZone.isEmpty ? "" : try DeviceRegistration.timeZone(settings.timeZone, field: "time_zone")
        return preferences
    }

    var wire: Kindred.Notify.V1.NotificationSettings {
        var settings = Kindred.Notify.V1.NotificationSettings()
        settings.newMatch = self.newMatch
        settings.newMessage = self.newMessage
        settings.likesReceived = self.likesReceived
        settings.reportOutcome = self.reportOutcome
        settings.activities = self.activities
        settings.showMessageText = self.showMessageText
        settings.timeZone = self.timeZone
        var quiet = Kindred.Notify.V1.QuietHours()
        quiet.enabled = self.quietHours.enabled
        quiet.startMinute = Int32(self.quietHours.startMinute)
        quiet.endMinute = Int32(self.quietHours.endMinute)
        quiet.allowMatches = self.quietHours.allowMatches
        settings.quietHours = quiet
        return settings
    }
}
