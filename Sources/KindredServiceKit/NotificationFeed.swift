import KindredPostgres
import Logging

/// A LISTEN that stays up: listens on `channel` on a connection of its own, hands every notification to
/// `received`, and after a lost connection listens again (100 ms doubling to 2 s). Notifications sent while it
/// was down are lost, so `connected` runs after every (re)connection, once LISTEN is in effect: the place to
/// catch up from the tables (auth's session ends, chat's event logs).
///
/// ```swift
/// let feed = NotificationFeed(database: database, channel: "kindred_chat", logger: logger)
/// runner.background.append(BackgroundTask("chat-feed") {
///     await feed.run(connected: { hub.resynchronize() }, lost: { hub.markLost() }) { hub.dispatch($0.payload) }
/// })
/// ```
public struct NotificationFeed: Sendable {
    public let database: PostgresClient
    public let channel: String
    private let logger: Logger

    public init(database: PostgresClient, channel: String, logger: Logger) {
        self.database = database
        self.channel = channel
        self.logger = logger
    }

    /// Runs until the task is cancelled.
    public func run(
        connected: @Sendable () async -> Void,
        lost: @Sendable () -> Void = {},
        received: @Sendable (PostgresNotification) -> Void
    ) async {
        var delay: Duration = .milliseconds(100)
        while !Task.isCancelled {
            do {
                let notifications = try await self.database.listen(channel: self.channel)
                await connected()
                delay = .milliseconds(100)
                for try await notification in notifications {
                    received(notification)
                }
            } catch {
                if !Task.isCancelled {
                    self.logger.warning(
                        "notification feed lost its database connection; reconnecting",
                        metadata: ["db.channel": "\(self.channel)", "error.type": "\(type(of: error))"]
                    )
                }
            }
            lost()
            if Task.isCancelled { return }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(2))
        }
    }
}
