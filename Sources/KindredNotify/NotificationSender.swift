import Foundation
import KindredPostgres
import KindredPush
import Logging
import CoreMetrics
import Synchronization

/// Sends what is due in the queue (table `notifications`) to each of the recipient's devices, through the
/// provider of the device's platform, and acts on how each attempt ended:
/// - delivered: recorded per device (`notification_deliveries`, in the statement that ends or retries the
///   notification), so a retry of the notification skips that device;
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
    /// Most notifications in flight at once (`KINDRED_NOTIFY_SEND_CONCURRENCY`).
    let concurrency: Int
    /// Events applied in this process wake the sender (``SendWakeup``); the poll does otherwise.
    let wakeup: SendWakeup
    private let waiting = Mutex(false)
    /// Attempts that ended since the loop last looked (``run()``).
    private let ended = Mutex(EndedAttempts())
    /// The first retry's delay, doubled per attempt up to `maxBackoff`; after `maxAttempts` it is failed.
    static let firstBackoff: Duration = .seconds(2)
    static let maxBackoff: Duration = .seconds(3600)
    static let maxAttempts = 12
    /// How long quiet hours postpone a notification before it is looked at again.
    static let quietRecheck: Duration = .seconds(300)
    static let outcomes = ["sent", "failed", "gone", "retried", "skipped", "suppressed"]

    init(
        database: PostgresClient, providers: [DevicePlatform: any PushProvider], apnsTopic: String,
        pollInterval: Duration, lease: Duration = .seconds(60), concurrency: Int = 64,
        wakeup: SendWakeup = SendWakeup(), chat: ChatContextClient? = nil,
        names: MemberNames? = nil, metrics: any MetricsFactory, logger: Logger
    ) {
        self.chat = chat
        self.names = names
        self.database = database
        self.providers = providers
        self.apnsTopic = apnsTopic
        self.pollInterval = pollInterval
        self.lease = lease
        self.concurrency = max(1, concurrency)
        self.wakeup = wakeup
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

    /// Claims due notifications and sends them, at most `concurrency` at once, until cancelled. A notification holds
    /// its slot from its claim until its end is recorded, so a sender killed mid-burst leaves at most `concurrency`
    /// pushes that a device may get twice (sent, but not recorded yet), each under its stable id. Under load it
    /// claims again once a quarter of the slots are free, so that one claim and its reads (``ClaimedBatch``) serve
    /// several notifications.
    ///
    /// One loop does the database work, woken (``SendWakeup``) by events applied in this process, by a push that
    /// ended and by the poll: it first records every end that came in since its last look, in one statement
    /// (``NotificationStore/record(_:in:)``: one commit for a group of pushes, not one each), then claims, reads the
    /// batch and asks chat about it (``askChat(about:)``: one call, which the loop waits for, up to the client's
    /// timeout when chat does not answer).
    func run() async {
        let (wakeups, wake) = self.wakeup.subscribe()
        let refill = max(1, self.concurrency / 4)
        var inFlight = 0
        await withDiscardingTaskGroup { group in
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: self.pollInterval)
                    wake.yield()
                }
            }
            wake.yield()
            var iterator = wakeups.makeAsyncIterator()
            while true {
                self.waiting.withLock { $0 = inFlight == 0 }
                guard await iterator.next() != nil, !Task.isCancelled else { break }
                self.waiting.withLock { $0 = false }
                let done = self.ended.withLock { ended in
                    defer { ended = EndedAttempts() }
                    return ended
                }
                if !done.ends.isEmpty { await self.recordLogging(done.ends) }
                inFlight -= done.ends.count + done.abandoned
                guard inFlight == 0 || self.concurrency - inFlight >= refill else { continue }
                do {
                    let limit = self.concurrency - inFlight
                    let due = try await self.notifications.claimDue(limit: limit, lease: self.lease, in: self.database)
                    guard !due.isEmpty else { continue }
                    var read = try await ClaimedBatch.read(due, sender: self, in: self.database)
                    await self.askChat(about: &read)
                    let batch = read
                    inFlight += due.count
                    for notification in due {
                        group.addTask {
                            let end = await self.attemptLogging(notification, in: batch)
                            self.ended.withLock { ended in
                                if let end { ended.ends.append(end) } else { ended.abandoned += 1 }
                            }
                            wake.yield()
                        }
                    }
                    if due.count == limit { wake.yield() }  // more may be due already
                } catch is CancellationError {
                    break
                } catch {
                    // Claimed rows whose reads failed are taken again after their lease.
                    self.logger.warning("notify sender: \(error)")
                }
            }
            group.cancelAll()
        }
        wake.finish()
        self.waiting.withLock { $0 = false }
    }

    /// Whether the sender waits for work with nothing in flight (tests wait for it to be idle).
    var isWaiting: Bool { self.waiting.withLock { $0 } }

    /// Ends of attempts not recorded yet, and attempts that ended without one (left claimed: taken again after
    /// their lease, with the same id).
    private struct EndedAttempts: Sendable {
        var ends: [NotificationEnd] = []
        var abandoned = 0
    }

    /// Records `ends`; tried again twice (a deadlock with an event's cancellation makes PostgreSQL abort one side).
    /// Ends not recorded leave their notifications claimed: they are taken again after their lease, with the same id.
    private func recordLogging(_ ends: [NotificationEnd]) async {
        for attempt in 1...3 {
            do {
                return try await self.notifications.record(ends, in: self.database)
            } catch is CancellationError {
                return
            } catch {
                if attempt == 3 {
                    self.logger.warning(
                        "notify sender: ends not recorded", metadata: ["error": "\(error)", "ends.count": "\(ends.count)"])
                }
            }
        }
    }

    private func attemptLogging(_ queued: QueuedNotification, in batch: ClaimedBatch) async -> NotificationEnd? {
        do {
            return try await self.attempt(queued, in: batch)
        } catch is CancellationError {
            return nil
        } catch {
            // Left claimed: taken again after its lease, with the same id.
            self.logger.warning("notify sender: \(error)", metadata: ["notification.id": "\(queued.id)"])
            return nil
        }
    }

    /// What the sender asks chat before pushing `queued`: its member, its thread, and the latest message's body when
    /// the member shows message text; nil when every device was reached on an earlier attempt (nothing to push).
    func chatAsk(for queued: QueuedNotification, in batch: ClaimedBatch) -> ChatContextAsk? {
        let delivered = batch.delivered[queued.id] ?? []
        guard (batch.devices[queued.user] ?? []).contains(where: { !delivered.contains($0.deviceID) }) else { return nil }
        let showsText = batch.preferences(of: queued.user).showMessageText && queued.kind == .newMessage
        return ChatContextAsk(user: queued.user, thread: queued.thread, bodyOf: showsText ? queued.latestMessage : nil)
    }

    /// Asks chat about the notifications of `batch` with a device left to reach, in one call
    /// (``ChatContextClient/maxBatch`` at most each), rather than one call per push. Chat's answer for one that ends
    /// before its push (quiet hours, a kind turned off, an expired broadcast) goes unused.
    func askChat(about batch: inout ClaimedBatch) async {
        guard let chat = self.chat else { return }
        let asks = batch.notifications.compactMap { queued in self.chatAsk(for: queued, in: batch).map { (queued.id, $0) } }
        for start in stride(from: 0, to: asks.count, by: ChatContextClient.maxBatch) {
            let part = asks[start..<min(start + ChatContextClient.maxBatch, asks.count)]
            guard let answers = await chat.contexts(of: part.map(\.1)) else { continue }
            for ((id, _), answer) in zip(part, answers) { batch.contexts[id] = answer }
        }
    }

    /// One notification to each of its recipient's devices not reached yet, with what `batch` read about it; returns
    /// how the attempt ended, for the sender's loop to record.
    func attempt(_ claimed: QueuedNotification, in batch: ClaimedBatch) async throws -> NotificationEnd {
        var queued = claimed
        if let expires = queued.expiresUnixMs, PostgresTimestamp.now.millisecondsSinceEpoch >= expires {
            // An activity broadcast that ended while the push waited (quiet hours, an outage) is not news any more.
            return .finished(queued.id, as: "cancelled")
        }
        if queued.kind == .likes {
            // A likes digest tells how many likes it still stands for (a block or a match may have taken some out).
            queued.itemCount = batch.likes[queued.id] ?? 0
            if queued.itemCount == 0 { return .finished(queued.id, as: "cancelled") }
        }
        let preferences = batch.preferences(of: queued.user)
        let devices = batch.devices[queued.user] ?? []
        guard queued.kind.isWanted(by: preferences) else { return .finished(queued.id, as: "cancelled") }
        let allowedInQuiet = queued.kind == .newMatch && preferences.quietHours.allowMatches
        if !allowedInQuiet, preferences.isQuiet(at: Date(), deviceTimeZone: devices.first?.timeZone ?? "UTC") {
            // An activity broadcast is looked at again when it ends at the latest (then cancelled, never sent late).
            let untilExpiry = queued.expiresUnixMs.map {
                Duration.milliseconds(max(0, $0 - PostgresTimestamp.now.millisecondsSinceEpoch))
            }
            return .retry(queued.id, after: min(Self.quietRecheck, untilExpiry ?? Self.quietRecheck), attempt: false)
        }
        let delivered = batch.delivered[queued.id] ?? []
        let facts: NotificationTemplates.Facts
        var badge: Int?
        if devices.contains(where: { !delivered.contains($0.deviceID) }) {
            // Chat's answer for the batch (``askChat(about:)``); none when chat did not answer.
            let context = batch.contexts[queued.id]
            switch PushDecision.decide(queued, preferences: preferences, chat: context) {
            case .suppress:
                for platform in Set(devices.map(\.platform)) { self.count(platform, "suppressed") }
                return .finished(queued.id, as: "suppressed")
            case .cancel:
                return .finished(queued.id, as: "cancelled")
            case .send(var decided, let count):
                if let subject = queued.subject { decided.name = await self.names?.name(of: subject, for: queued.user) }
                facts = decided
                badge = count
            }
        } else {
            facts = .init()
        }
        var reached: [String] = []
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
                self.count(device.platform, "sent")
                reached.append(device.deviceID)
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
                return .retry(queued.id, after: retryAfter, attempt: true, delivered: reached)
            }
            rejected = true
            self.logger.warning("notify sender: notification \(queued.id) given up after \(Self.maxAttempts) attempts")
        }
        let state = rejected ? "failed" : !reached.isEmpty || !delivered.isEmpty ? "sent" : "skipped"
        return .finished(queued.id, as: state, delivered: reached)
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
