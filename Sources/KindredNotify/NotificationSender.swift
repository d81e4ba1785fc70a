import Foundation
import KindredPostgres
import KindredPush
import Logging
import CoreMetrics
import Synchronization

/// Sends what is due in the queue (table `notifications`) to each of the recipient's devices, through the
/// provider of the device's platform, and acts on how each attempt ended:
/// - delivered: recorded per device (`notification_deliveries`), so a retry of the notification skips that device;
///   the notification's id is the push's id (`apns-id`), the same on every attempt;
/// - target gone: the device is removed;
/// - retry later: the notification is tried again with exponential backoff (at least the provider's Retry-After),
///   and that provider alone is paused meanwhile;
/// - rejected: the notification is marked failed once nothing else is pending, and logged.
/// Devices of a platform without a provider are skipped with a log line. Quiet hours postpone a notification
/// (a match goes through when the member allows it). Just before the push, chat says whether the member has the app
/// open (then a message needs no push: `suppressed`), whether a message's thread is still open (else `cancelled`),
/// the unread total (the badge) and, only when the member shows message text, the body (``PushDecision``). Texts
/// are rendered per device locale; the other member is named from profile's card (``MemberNames``), or with the
/// neutral word of the templates ("Someone") when profile cannot say.
final class NotificationSender: Sendable {
    let database: PostgresClient
    let providers: [DevicePlatform: any PushProvider]
    /// `apns-topic`: the app's bundle id from the configuration (never what a device registered).
    let apnsTopic: String
    let pollInterval: Duration
    let logger: Logger
    /// Chat's presence, badge and message text; nil = not configured (pushes go out without them).
    let chat: ChatContextClient?
    /// Profile's display names; nil = not configured ("Someone").
    let names: MemberNames?
    let notifications = NotificationStore()
    let devices = DeviceStore()
    let settings = SettingsStore()
    let digests = DigestStore()
    private let pausedUntil = Mutex<[DevicePlatform: ContinuousClock.Instant]>([:])
    private let counters: [String: Counter]

    /// How long a claimed notification is left to this sender before another may take it
    /// (`KINDRED_NOTIFY_SEND_LEASE_MS`).
    let lease: Duration
    /// The first retry's delay, doubled per attempt up to `maxBackoff`; after `maxAttempts` it is failed.
    static let firstBackoff: Duration = .seconds(2)
    static let maxBackoff: Duration = .seconds(3600)
    static let maxAttempts = 12
    /// How long quiet hours postpone a notification before it is looked at again.
    static let quietRecheck: Duration = .seconds(300)
    static let outcomes = ["sent", "failed", "gone", "retried", "skipped", "suppressed"]

    init(
        database: PostgresClient, providers: [DevicePlatform: any PushProvider], apnsTopic: String,
        pollInterval: Duration, lease: Duration = .seconds(60), chat: ChatContextClient? = nil,
        names: MemberNames? = nil, metrics: any MetricsFactory, logger: Logger
    ) {
        self.chat = chat
        self.names = names
        self.database = database
        self.providers = providers
        self.apnsTopic = apnsTopic
        self.pollInterval = pollInterval
        self.lease = lease
        self.logger = logger
        var counters: [String: Counter] = [:]
        for platform in DevicePlatform.allCases {
            for outcome in Self.outcomes {
                counters["\(platform.rawValue)/\(outcome)"] = Counter(
                    label: "notify_push_total", dimensions: [("platform", platform.rawValue), ("outcome", outcome)],
                    factory: metrics)
            }
        }
        self.counters = counters
    }

    /// Claims and sends due notifications until cancelled.
    func run() async {
        while !Task.isCancelled {
            do {
                let due = try await self.notifications.claimDue(limit: 50, lease: self.lease, in: self.database)
                for notification in due { try await self.send(notification) }
                if due.isEmpty { try await Task.sleep(for: self.pollInterval) }
            } catch is CancellationError {
                return
            } catch {
                self.logger.warning("notify sender: \(error)")
                try? await Task.sleep(for: self.pollInterval)
            }
        }
    }

    /// One notification to each of its recipient's devices not reached yet.
    func send(_ claimed: QueuedNotification) async throws {
        var queued = claimed
        if let expires = queued.expiresUnixMs, PostgresTimestamp.now.millisecondsSinceEpoch >= expires {
            // An activity broadcast that ended while the push waited (quiet hours, an outage) is not news any more.
            return try await self.notifications.finish(queued.id, as: "cancelled", in: self.database)
        }
        if queued.kind == .likes {
            // A likes digest tells how many likes it still stands for (a block or a match may have taken some out).
            queued.itemCount = try await self.digests.count(of: queued.id, in: self.database)
            if queued.itemCount == 0 {
                return try await self.notifications.finish(queued.id, as: "cancelled", in: self.database)
            }
        }
        let preferences = try await self.settings.preferences(of: queued.user, in: self.database)
        let devices = try await self.devices.list(queued.user, in: self.database)
        guard queued.kind.isWanted(by: preferences) else {
            return try await self.notifications.finish(queued.id, as: "cancelled", in: self.database)
        }
        let allowedInQuiet = queued.kind == .newMatch && preferences.quietHours.allowMatches
        if !allowedInQuiet, preferences.isQuiet(at: Date(), deviceTimeZone: devices.first?.timeZone ?? "UTC") {
            // An activity broadcast is looked at again when it ends at the latest (then cancelled, never sent late).
            let untilExpiry = queued.expiresUnixMs.map {
                Duration.milliseconds(max(0, $0 - PostgresTimestamp.now.millisecondsSinceEpoch))
            }
            let recheck = min(Self.quietRecheck, untilExpiry ?? Self.quietRecheck)
            return try await self.notifications.retry(queued.id, after: recheck, attempt: false, in: self.database)
        }
        let delivered = try await self.notifications.deliveredDevices(of: queued.id, in: self.database)
        let facts: NotificationTemplates.Facts
        var badge: Int?
        if devices.contains(where: { !delivered.contains($0.deviceID) }) {
            let context = await self.chat?.context(
                of: queued.user, thread: queued.thread,
                bodyOf: preferences.showMessageText && queued.kind == .newMessage ? queued.latestMessage : nil)
            switch PushDecision.decide(queued, preferences: preferences, chat: context) {
            case .suppress:
                for platform in Set(devices.map(\.platform)) { self.count(platform, "suppressed") }
                return try await self.notifications.finish(queued.id, as: "suppressed", in: self.database)
            case .cancel:
                return try await self.notifications.finish(queued.id, as: "cancelled", in: self.database)
            case .send(var decided, let count):
                if let subject = queued.subject { decided.name = await self.names?.name(of: subject, for: queued.user) }
                facts = decided
                badge = count
            }
        } else {
            facts = .init()
        }
        var reached = false
        var rejected = false
        var retryAfter: Duration?
        for device in devices where !delivered.contains(device.deviceID) {
            guard let provider = self.providers[device.platform] else {
                self.count(device.platform, "skipped")
                self.logger.info("notify sender: no \(device.platform.rawValue) provider configured, device skipped")
                continue
            }
            if let paused = self.pause(of: device.platform) {
                retryAfter = max(retryAfter ?? .zero, paused)
                continue
            }
            let outcome = await provider.send(
                Self.push(queued, locale: device.locale, facts: facts, badge: badge), to: self.target(device))
            switch outcome {
            case .delivered:
                try await self.notifications.recordDelivery(of: queued.id, to: device.deviceID, in: self.database)
                self.count(device.platform, "sent")
                reached = true
            case .targetGone:
                _ = try await self.devices.remove(id: device.deviceID, of: queued.user, in: self.database)
                self.count(device.platform, "gone")
                self.logger.info("notify sender: \(device.platform.rawValue) device gone, removed")
            case .retryLater(let after):
                let delay = max(after ?? .zero, Self.backoff(after: queued.attempts))
                self.pause(device.platform, for: after ?? Self.backoff(after: queued.attempts))
                retryAfter = max(retryAfter ?? .zero, delay)
                self.count(device.platform, "retried")
            case .rejected(let reason):
                rejected = true
                self.count(device.platform, "failed")
                self.logger.warning(
                    "notify sender: \(device.platform.rawValue) rejected notification \(queued.id): \(reason)")
            }
        }
        if let retryAfter {
            if queued.attempts + 1 < Self.maxAttempts {
                return try await self.notifications.retry(queued.id, after: retryAfter, attempt: true, in: self.database)
            }
            rejected = true
            self.logger.warning("notify sender: notification \(queued.id) given up after \(Self.maxAttempts) attempts")
        }
        let state = rejected ? "failed" : reached || !delivered.isEmpty ? "sent" : "skipped"
        try await self.notifications.finish(queued.id, as: state, in: self.database)
    }

    /// What the device shows, in its locale. Only kind and ids reach the payload's data. An activity broadcast
    /// expires when it ends (`apns-expiration`, FCM's `android.ttl`, Web Push's `TTL`): a phone that comes online
    /// after the workout is not told about it. Other kinds keep the provider's default.
    static func push(_ queued: QueuedNotification, locale: String, facts: NotificationTemplates.Facts, badge: Int?)
        -> PushNotification
    {
        let text = NotificationTemplates.render(queued.kind, locale: locale, facts)
        var data = ["kind": queued.kind.rawValue]
        if let subject = queued.subject { data["user_id"] = subject }
        if let thread = queued.thread { data["thread_id"] = thread }
        return PushNotification(
            id: queued.id, title: text.title, body: text.body, collapseKey: queued.collapseKey, badge: badge, data: data,
            expiresAt: queued.expiresUnixMs.map { Date(timeIntervalSince1970: Double($0) / 1000) })
    }

    func target(_ device: DeviceRecord) -> PushTarget {
        switch device.platform {
        case .apns: .apns(deviceToken: device.token, topic: self.apnsTopic)
        case .fcm: .fcm(registrationToken: device.token)
        case .webPush: .webPush(endpoint: device.token, p256dh: device.p256dh ?? "", auth: device.authSecret ?? "")
        }
    }

    /// The delay before retry number `attempts + 1`: doubling from `firstBackoff`, at most `maxBackoff`.
    static func backoff(after attempts: Int) -> Duration {
        min(Self.firstBackoff * (1 << min(attempts, 20)), Self.maxBackoff)
    }

    /// How long `platform`'s provider is still paused, if it is.
    private func pause(of platform: DevicePlatform) -> Duration? {
        let now = ContinuousClock.now
        return self.pausedUntil.withLock { paused in
            guard let until = paused[platform], until > now else { return nil }
            return until - now
        }
    }

    private func pause(_ platform: DevicePlatform, for duration: Duration) {
        let until = ContinuousClock.now + duration
        self.pausedUntil.withLock { $0[platform] = max($0[platform] ?? until, until) }
    }

    private func count(_ platform: DevicePlatform, _ outcome: String) {
        self.counters["\(platform.rawValue)/\(outcome)"]?.increment()
    }
}
