import KindredPostgres
import KindredServiceKit
import Logging
import NIOConcurrencyHelpers

/// Who has the app open, across replicas: each Subscribe stream is a row of `live_streams` for as long as it is
/// open, refreshed by its server every `interval`. A row counts while it was refreshed within three intervals, so a
/// server that dies holding streams makes its members read as online for at most that long (a push skipped then,
/// never one sent twice). notify asks through `GetNotificationContext` when it is about to send, so the answer is
/// the state at the push, not at the message's commit.
public final class ChatPresence: Sendable {
    let database: PostgresClient
    let interval: Duration
    let logger: Logger
    private let store = PresenceStore()
    /// The streams open on this server, by stream id.
    private let local = NIOLockedValueBox<Set<String>>([])

    init(database: PostgresClient, interval: Duration, logger: Logger) {
        self.database = database
        self.interval = interval
        self.logger = logger
    }

    /// How long a row counts without a refresh.
    var freshness: Duration { self.interval * 3 }

    /// Records a stream of `user` as open; returns its id for ``leave(_:)``.
    func join(_ user: String) async throws -> String {
        let stream = try UUIDv7.generate()
        self.local.withLockedValue { _ = $0.insert(stream) }
        try await self.store.join(stream: stream, user: user, in: self.database)
        return stream
    }

    /// The stream ended: it stops counting at once (the row goes in the background, the refresh skips it now).
    func leave(_ stream: String) {
        self.local.withLockedValue { _ = $0.remove(stream) }
        let database = self.database
        let store = self.store
        let logger = self.logger
        Task {
            do { try await store.leave(stream: stream, in: database) } catch {
                logger.warning("chat presence: a stream's row stays until it expires", metadata: ["error.type": "\(type(of: error))"])
            }
        }
    }

    func isOnline(_ user: String) async throws -> Bool {
        try await self.store.isOnline(user, freshness: self.freshness, in: self.database)
    }

    /// The statement of ``isOnline(_:)``, to send with others in one round trip (one row, one boolean).
    func isOnlineQuery(_ user: String) -> PostgresQuery {
        self.store.isOnlineQuery(user, freshness: self.freshness)
    }

    /// Refreshes this server's streams every `interval` until cancelled.
    func run() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: self.interval)
            let streams = self.local.withLockedValue { Array($0) }
            do { try await self.store.refresh(streams, in: self.database) } catch {
                self.logger.warning("chat presence refresh failed", metadata: ["error.type": "\(type(of: error))"])
            }
        }
    }

    /// Deletes rows no server refreshes any more.
    func purge() async throws {
        try await self.store.purge(staleAfter: self.freshness, in: self.database)
    }

    func erase(_ user: String, in transaction: PostgresTransaction) async throws {
        try await self.store.erase(user, in: transaction)
    }
}
