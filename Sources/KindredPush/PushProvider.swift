/// One way of reaching a member's device: Apple's push service, Firebase Cloud Messaging or a browser's Web Push
/// service. The notify service decides what to send and when; a provider only speaks its protocol and says how
/// the attempt ended, so that retries, token removal and back-pressure are decided in one place.
public protocol PushProvider: Sendable {
    var platform: PushPlatform { get }

    /// Sends `notification` to one device. Never throws: every failure is an outcome the caller acts on.
    func send(_ notification: PushNotification, to target: PushTarget) async -> PushOutcome
}
