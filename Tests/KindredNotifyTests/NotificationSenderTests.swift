import KindredGRPCServices
import KindredPush
import Testing

@testable import KindredNotify

@Suite("Notification sender rules")
struct NotificationSenderTests {
    @Test func backoffDoublesFromTwoSecondsUpToAnHour() {
        #expect(NotificationSender.backoff(after: 0) == .seconds(2))
        #expect(NotificationSender.backoff(after: 1) == .seconds(4))
        #expect(NotificationSender.backoff(after: 5) == .seconds(64))
        #expect(NotificationSender.backoff(after: 11) == .seconds(3600))
        #expect(NotificationSender.backoff(after: 1000) == .seconds(3600))
    }

    @Test func providersAreConfiguredOnlyWithTheirKeys() throws {
        let none = try NotifyConfiguration(EnvironmentReader([:]))
        #expect(none.apns == nil && none.fcm == nil)
        let both = try NotifyConfiguration(
            EnvironmentReader([
                "KINDRED_NOTIFY_APNS_KEY_FILE": "/keys/apns.p8", "KINDRED_NOTIFY_APNS_KEY_ID": "KEY1234567",
                "KINDRED_NOTIFY_APNS_TEAM_ID": "TEAM123456", "KINDRED_NOTIFY_APNS_TOPIC": "dev.kindred.app",
                "KINDRED_NOTIFY_APNS_BASE_URL": "https://api.sandbox.push.apple.com",
                "KINDRED_NOTIFY_FCM_SERVICE_ACCOUNT_FILE": "/keys/fcm.json",
            ]))
        #expect(both.apns?.topic == "dev.kindred.app" && both.apns?.baseURL == "https://api.sandbox.push.apple.com")
        #expect(both.fcm?.serviceAccountFile == "/keys/fcm.json" && both.fcm?.baseURL == "https://fcm.googleapis.com")
    }

    @Test func anAPNsKeyWithoutItsTopicIsAConfigurationError() {
        #expect(throws: ConfigurationError.self) {
            try NotifyConfiguration(
                EnvironmentReader([
                    "KINDRED_NOTIFY_APNS_KEY_FILE": "/keys/apns.p8", "KINDRED_NOTIFY_APNS_KEY_ID": "KEY1234567",
                    "KINDRED_NOTIFY_APNS_TEAM_ID": "TEAM123456",
                ]))
        }
    }
}
