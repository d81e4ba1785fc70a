import KindredGRPC
import KindredGRPCServices
import KindredPostgres
import KindredPush
import KindredServiceKit
import Logging

/// The whole notify service, built from a configuration: database pool, the link to auth (keys, service token,
/// session ends), the sweep that removes devices of ended sessions, the sender (when a push provider is
/// configured), housekeeping, and the gRPC server.
/// `notify-server` is a thin wrapper around it; tests start it in-process through `TestServer`.
public final class NotifyServer: ServiceServer {
    public let configuration: NotifyConfiguration
    public let database: PostgresClient
    public let auth: AuthConnection
    public let service: NotifyService
    public let runner: ServerRunner
    /// The push providers configured (APNs, FCM), closed by ``shutdown()``.
    private let apns: APNsProvider?
    private let fcm: FCMProvider?
    /// The sender's links to chat (presence, badge, message text) and profile (names), when configured.
    private let chat: ChatContextClient?
    private let names: MemberNames?
    private let webPush: WebPushProvider?
    /// Posts webhook deliveries; its connections are closed by ``shutdown()``.
    private let webhookSender: WebhookSender
    /// Whether `auth` was made here (and is closed by ``shutdown()``) rather than passed in.
    private let ownsAuth: Bool

    /// `auth`: how callers are checked; nil = connect to `configuration.auth.address` (tests pass fixed keys).
    public init(configuration: NotifyConfiguration, auth: AuthConnection? = nil, logger: Logger) throws {
        self.configuration = configuration
        self.database = try configuration.database.makeClient(logger: logger)
        self.ownsAuth = auth == nil
        self.auth = auth ?? AuthConnection(settings: configuration.auth, serviceName: "notify", logger: logger)
        self.webPush = try configuration.webPush.map { try WebPushProvider(configuration: $0, logger: logger) }
        self.service = NotifyService(
            configuration: configuration, database: self.database, auth: self.auth,
            webPushApplicationServerKey: self.webPush?.applicationServerKey ?? "", logger: logger)
        let metrics = ServerMetrics()
        self.apns = try configuration.apns.map { try APNsProvider(configuration: $0, logger: logger) }
        self.fcm = try configuration.fcm.map { try FCMProvider(configuration: $0, logger: logger) }
        var providers: [DevicePlatform: any PushProvider] = [:]
        providers[.apns] = self.apns
        providers[.fcm] = self.fcm
        let tokens = self.auth.serviceTokens
        self.chat = both(configuration.chatAddress, tokens).map { ChatContextClient(address: $0, tokens: $1, logger: logger) }
        self.names = both(configuration.profileAddress, tokens).map { MemberNames(address: $0, tokens: $1, logger: logger) }
        providers[.webPush] = self.webPush
        // Without any provider nothing is sent: notifications stay queued until keys are configured.
        let sender =
            providers.isEmpty
            ? nil
            : NotificationSender(
                database: self.database, providers: providers, apnsTopic: configuration.apns?.topic ?? "",
                pollInterval: configuration.sendPollInterval, lease: configuration.sendLease,
                concurrency: configuration.sendConcurrency, wakeup: self.service.sendWakeup, chat: self.chat,
                names: self.names, metrics: metrics.factory, logger: logger)
        if sender == nil { logger.info("notify: no push provider configured, notifications stay queued") }
        let webhooks = WebhookAdmin(
            settings: configuration.webhooks, database: self.database, access: self.auth.access,
            serviceSecret: configuration.auth.serviceSecret)
        let webhookSender = WebhookSender(
            database: self.database, settings: configuration.webhooks, metrics: metrics.factory, logger: logger)
        self.webhookSender = webhookSender
        var runner = ServerRunner(
            configuration: try configuration.endpoint.serverConfiguration(), services: [self.service, webhooks])
        runner.admin = configuration.endpoint.adminConfiguration
        runner.metrics = metrics
        PostgresPoolMetrics.attach(pool: "notify", database: self.database, to: metrics)
        let service = self.service
        runner.background = self.auth.backgroundTasks + [
            BackgroundTask("session-sweep") { await service.sweepEndedSessions() },
            self.service.inbox.purgeTask(),
            BackgroundTask("tombstone-purge") { await service.purgeTombstones() },
            BackgroundTask("webhook-sender") { await webhookSender.run() },
            BackgroundTask("webhook-purge") {
                while !Task.isCancelled {
                    try await Task.sleep(for: .seconds(3600))
                    _ = try? await webhookSender.store.purge(
                        olderThanDays: configuration.webhooks.retentionDays, in: webhookSender.database)
                }
            },
        ] + (sender.map { sender in [BackgroundTask("sender") { await sender.run() }] } ?? [])
        if let bus = JetStreamEventConsumer.backgroundTask(
            consumer: "notify", producers: NotifyService.eventProducers, settings: configuration.eventBus, logger: logger,
            apply: { [service] in try await service.applyEvents($0, from: $1) })
        {
            runner.background.append(bus)
        }
        self.runner = runner
    }

    /// What must hold before serving: webhook secrets an older version wrote in the clear are sealed, and the
    /// configured key opens the sealed ones (else a `ConfigurationError` naming `KINDRED_NOTIFY_WEBHOOK_KEY`).
    public func prepare(logger: Logger) async throws {
        try await WebhookSecretsAtRest.prepare(
            key: self.configuration.webhooks.secretKey, database: self.database, logger: logger)
    }

    public func shutdown() async {
        await self.apns?.close()
        await self.fcm?.close()
        await self.chat?.close()
        await self.names?.close()
        await self.webPush?.close()
        await self.webhookSender.close()
        await self.database.shutdown()
        if self.ownsAuth { await self.auth.shutdown() }
    }
}

/// Both values, or nil.
private func both<A, B>(_ a: A?, _ b: B?) -> (A, B)? {
    guard let a, let b else { return nil }
    return (a, b)
}
