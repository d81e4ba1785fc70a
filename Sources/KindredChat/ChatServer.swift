import CoreMetrics
import KindredGRPC
import KindredGRPCServices
import KindredPostgres
import KindredServiceKit
import Logging

/// The whole chat service, built from a configuration: database pool, the link to auth (keys, service token,
/// session ends), the live-event hub on a LISTEN connection, housekeeping, and the gRPC server. `chat-server` is
/// a thin wrapper around it; tests start it in-process.
public final class ChatServer: ServiceServer {
    public let configuration: ChatConfiguration
    public let database: PostgresClient
    public let auth: AuthConnection
    public let service: ChatService
    public let runner: ServerRunner
    /// Delivers chat's events to the configured consumers (notify); nil when none is configured.
    public let eventRelay: OutboxRelay?
    private let logger: Logger

    public init(configuration: ChatConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        self.database = try configuration.database.makeClient(logger: logger)
        self.auth = AuthConnection(settings: configuration.auth, serviceName: "chat", logger: logger)
        let hub = ChatEventHub(capacity: configuration.subscriberBuffer)
        self.service = ChatService(
            configuration: configuration, database: self.database, authenticator: self.auth.authenticator, hub: hub,
            logger: logger)
        let metrics = ServerMetrics()
        var runner = ServerRunner(configuration: try configuration.endpoint.serverConfiguration(), services: [self.service])
        runner.admin = configuration.endpoint.adminConfiguration
        runner.metrics = metrics
        PostgresPoolMetrics.attach(pool: "chat", database: self.database, to: metrics)
        // chat_subscribers: open Subscribe streams on this server; chat_listening: 1 while its LISTEN is up.
        let subscribers = Gauge(label: "chat_subscribers", factory: metrics.factory)
        let listening = Gauge(label: "chat_listening", factory: metrics.factory)
        metrics.addSampler {
            subscribers.record(hub.subscriberCount)
            listening.record(hub.isListening ? 1 : 0)
        }
        self.eventRelay = OutboxRelay(
            producer: "chat", settings: configuration.events, database: self.database,
            tokens: self.auth.serviceTokens, metricsFactory: metrics.factory, logger: logger)
        let feed = NotificationFeed(database: self.database, channel: EventLogStore.channel, logger: logger)
        let service = self.service
        let database = self.database
        let heartbeat = configuration.heartbeatInterval
        runner.background = self.auth.backgroundTasks + [
            BackgroundTask("chat-feed") {
                // At start, every replica's streams are asked to read their logs: notifications a replica queued and
                // never sent (it stopped between a commit and its notification) are lost, and a stopped replica
                // starts again. A reconnection loses none of this replica's (the notifier holds them), so it only
                // makes this replica's own streams read (`hub.connected()`).
                EventLogStore.resynchronizeAll(through: database)
                await feed.run(connected: { hub.connected() }, lost: { hub.lost() }) { hub.dispatch($0.payload) }
            },
            BackgroundTask("chat-heartbeat") {
                while !Task.isCancelled {
                    try? await Task.sleep(for: heartbeat)
                    hub.tick()
                }
            },
            BackgroundTask("chat-housekeeping") { await service.housekeeping() },
            BackgroundTask("chat-presence") { await service.presence.run() },
        ]
        if let events = self.eventRelay {
            runner.background.append(BackgroundTask("events-relay") { await events.run() })
        }
        if let bus = JetStreamEventConsumer.backgroundTask(
            consumer: "chat", producers: ChatService.eventProducers, settings: configuration.events.bus, logger: logger,
            apply: { [service] in try await service.applyEvents($0, from: $1) })
        {
            runner.background.append(bus)
        }

        // Subscribe streams never end by themselves: end them first so the drain does not wait for them.
        runner.beforeDrain = [{ hub.drain() }]
        self.runner = runner
    }

    /// Starts without waiting for signals (tests): returns once auth's keys and session ends are known and the
    /// LISTEN is up (or after 10 s). Stop with `stop()` on the result, then `shutdown()`.
    public func start() async throws -> RunningServer {
        let running = try await self.runner.start(logger: self.logger)
        _ = await self.waitUntilReady(timeout: .seconds(10))
        return running
    }

    /// Waits until auth's keys and session ends are known and the LISTEN is up, at most `timeout`.
    public func waitUntilReady(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        guard await self.auth.waitUntilReady(timeout: timeout) else { return false }
        while !self.service.hub.isListening {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    public func shutdown() async {
        await self.database.shutdown()
        await self.auth.shutdown()
    }
}
