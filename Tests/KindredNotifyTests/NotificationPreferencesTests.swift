import Foundation
import KindredProto
import Testing

@testable import KindredNotify

@Suite("Notification settings rules")
struct NotificationPreferencesTests {
    @Test func defaultsSendEverythingButMessageText() {
        let defaults = NotificationPreferences.defaults
        #expect(defaults.newMatch && defaults.newMessage && defaults.likesReceived && defaults.reportOutcome)
        #expect(!defaults.showMessageText)
        #expect(!defaults.quietHours.enabled)
    }

    @Test(arguments: [
        (22 * 60, 7 * 60, 23 * 60, true), (22 * 60, 7 * 60, 3 * 60, true), (22 * 60, 7 * 60, 7 * 60, false),
        (22 * 60, 7 * 60, 12 * 60, false), (9 * 60, 17 * 60, 9 * 60, true), (9 * 60, 17 * 60, 17 * 60, false),
        (9 * 60, 9 * 60, 9 * 60, false),
    ])
    func quietSpan(start: Int, end: Int, minute: Int, quiet: Bool) {
        let rule = NotificationPreferences.QuietHoursRule(enabled: true, startMinute: start, endMinute: end)
        #expect(rule.contains(minute: minute) == quiet)
        #expect(!NotificationPreferences.QuietHoursRule(enabled: false, startMinute: start, endMinute: end).contains(minute: minute))
    }

    @Test func quietHoursFollowTheTimeZone() {
        var preferences = NotificationPreferences()
        preferences.quietHours = .init(enabled: true, startMinute: 22 * 60, endMinute: 7 * 60)
        // 2026-01-15 22:30 UTC is 07:30 in Tokyo and 17:30 in New York.
        let instant = Date(timeIntervalSince1970: 1_768_516_200)
        #expect(preferences.isQuiet(at: instant, deviceTimeZone: "UTC"))
        #expect(!preferences.isQuiet(at: instant, deviceTimeZone: "Asia/Tokyo"))
        preferences.timeZone = "America/New_York"
        #expect(!preferences.isQuiet(at: instant, deviceTimeZone: "UTC"))
    }

    @Test func validationNamesTheField() {
        var settings = Notify.NotificationSettings()
        settings.quietHours = .with { $0.startMinute = 1440 }
        #expect(Self.field(settings) == "quiet_hours.start_minute")
        settings.quietHours = .with { $0.endMinute = -1 }
        #expect(Self.field(settings) == "quiet_hours.end_minute")
        settings.quietHours = nil
        settings.timeZone = "Nowhere/Else"
        #expect(Self.field(settings) == "time_zone")
    }

    @Test func roundTrip() throws {
        var settings = Notify.NotificationSettings()
        settings.newMessage = true
        settings.showMessageText = true
        settings.timeZone = "Europe/Paris"
        settings.quietHours = .with {
            $0.enabled = true
            $0.startMinute = 1320
            $0.endMinute = 420
            $0.allowMatches = true
        }
        #expect(try NotificationPreferences.validate(settings).wire == settings)
    }

    static func field(_ settings: Notify.NotificationSettings) -> String? {
        do {
            _ = try NotificationPreferences.validate(settings)
            return nil
        } catch { return error.violations.first?.field }
    }
}
