import Foundation
import KindredIdentity
import KindredPostgres
import KindredProto
import Logging
import NIOConcurrencyHelpers

/// Auth's side of "a session end is effective everywhere within a second".
///
/// Every way a session ends writes `revoked_sessions` and NOTIFYs `auth_session_revoked` in the transaction
/// that ends it (triggers on `sessions`, migration 0004). Each auth replica LISTENs on its own connection,
/// loads the table as a snapshot once listening, and then:
/// - keeps `revocations` (the set auth's own `CallerAuthenticator` checks) current;
/// - serves `WatchRevokedSessions` subscribers: the snapshot in chunks, each session end as it arrives, and a
///   heartbeat every `heartbeatInterval`;
/// - purges table rows past `keep_until` once a minute.
/// When the LISTEN connection breaks it stops heartbeats and ends every subscriber's stream (they reconnect,
/// possibly to another replica); its own set then goes stale and auth answers UNAVAILABLE for user tokens
/// until it has listened again and reloaded the snapshot.
public final class RevocationFeed: Sendable {
    public static let channel = "auth_session_revoked"
    static let chunkSize = 1000

    public typealias Message = Kindred.Auth.V1.WatchRevokedSessionsResponse

    /// Auth's own set (checked by its authenticator on every call).
    public let revocations: RevokedSessions
    private let database: PostgresClient
    private let heartbeatInterval: Duration
    private let logger: Logger
    private let state = NIOLockedValueBox(State())

    private struct State {
        var entries: [String: Int64] = [:]
        var synced = false
        var draining = false
        var subscribers: [Int: AsyncStream<Message>.Continuation] = [:]
        var nextID = 0
    }

    public init(
        database: PostgresClient,
        revocations: RevokedSessions,
        heartbeatInterval: Duration = .seconds(1),
        logger: Logger
    ) {
        self.database = database
        self.revocations = revocations
        self.heartbeatInterval = heartbeatInterval
        self.logger = logger
    }

    /// Whether the snapshot is loaded and the LISTEN connection is up.
    public var isSynced: Bool { self.state.withLockedValue { $0.synced } }

    /// Number of open `WatchRevokedSessions` streams.
    public var subscriberCount: Int { self.state.withLockedValue { $0.subscribers.count } }

    // MARK: Subscribers

    /// A new subscriber: its stream starts with the snapshot when the feed is synced (else with the next one).
    func subscribe() -> (id: Int, messages: AsyncStream<Message>) {
        let (stream, continuation) = AsyncStream.makeStream(of: Message.self, bufferingPolicy: .bufferingOldest(4096))
        let id = self.state.withLockedValue { state -> Int in
            state.nextID += 1
            if state.draining {
                continuation.finish()
                return state.nextID
            }
            state.subscribers[state.nextID] = continuation
            if state.synced {
                for message in Self.snapshot(state.entries) { continuation.yield(message) }
            }
            return state.nextID
        }
        return (id, stream)
    }

    func unsubscribe(_ id: Int) {
        let continuation = self.state.withLockedValue { $0.subscribers.removeValue(forKey: id) }
        continuation?.finish()
    }

    /// Ends every stream and refuses new ones (the server is shutting down).
    public func drain() {
        let ended = self.state.withLockedValue { state -> [AsyncStream<Message>.Continuation] in
            state.draining = true
            defer { state.subscribers.removeAll() }
            return Array(state.subscribers.values)
        }
        for continuation in ended { continuation.finish() }
    }

    static func snapshot(_ entries: [String: Int64]) -> [Message] {
        let sessions = entries.map { id, keepUntil in
            var session = Kindred.Auth.V1.RevokedSession()
            session.sessionId = id
            session.keepUntilUnixMs = keepUntil
            return session
        }
        var messages: [Message] = []
        var start = 0
        repeat {
            var message = Message()
            message.reset = start == 0
            message.sessions = Array(sessions[start..<min(start + Self.chunkSize, sessions.count)])
            start += Self.chunkSize
            message.synced = start >= sessions.count
            messages.append(message)
        } while start < sessions.count
        return messages
    }

    /// Sends to every subscriber (under the state lock, so no subscriber misses or reorders a message); a
    /// subscriber whose buffer is full is ended (it reconnects and gets a snapshot).
    private func broadcast(_ state: inout State, _ messages: [Message]) {
        for (id, continuation) in state.subscribers {
            for message in messages {
                if case .dropped = continuation.yield(message) {
                    continuation.finish()
                    state.subscribers.removeValue(forKey: id)
                    break
                }
            }
        }
    }

    // MARK: Running

    /// Listens, loads the snapshot and relays session ends until the task is cancelled; reconnects with
    /// backoff (100 ms doubling to 2 s) when the LISTEN connection breaks.
    public func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.heartbeats() }
            group.addTask { await self.listenLoop() }
            await group.next()
            group.cancelAll()
        }
        self.lose()
    }

    private func listenLoop() async {
        var delay: Duration = .milliseconds(100)
        while !Task.isCancelled {
            do {
                let notifications = try await self.database.listen(channel: Self.channel)
                try await self.loadSnapshot()
                delay = .milliseconds(100)
                for try await notification in notifications {
                    self.received(notification.payload)
                }
            } catch {
                if !Task.isCancelled {
                    self.logger.warning(
                        "session revocation feed lost its database connection; reconnecting",
                        metadata: ["error.type": "\(type(of: error))"]
                    )
                }
            }
            self.lose()
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(2))
        }
    }

    private func loadSnapshot() async throws {
        let entries = try await SessionStore().revokedSessions(in: self.database)
        self.state.withLockedValue { state in
            state.entries = entries
            state.synced = true
            self.revocations.apply(reset: true, sessions: entries.map { ($0.key, $0.value) }, synced: true)
            self.broadcast(&state, Self.snapshot(entries))
        }
        self.logger.info("session revocation feed synced", metadata: ["auth.revoked_sessions": "\(entries.count)"])
    }

    /// One NOTIFY payload: "<session id> <keep until ms>".
    func received(_ payload: String) {
        let parts = payload.split(separator: " ")
        guard parts.count == 2, let keepUntil = Int64(parts[1]) else {
            self.logger.error("malformed session revocation notification")
            return
        }
        let id = String(parts[0])
        var session = Kindred.Auth.V1.RevokedSession()
        session.sessionId = id
        session.keepUntilUnixMs = keepUntil
        var message = Message()
        message.sessions = [session]
        message.synced = true
        self.state.withLockedValue { state in
            state.entries[id] = max(state.entries[id] ?? 0, keepUntil)
            self.revocations.apply(reset: false, sessions: [(id, keepUntil)], synced: state.synced)
            if state.synced { self.broadcast(&state, [message]) }
        }
    }

    /// The LISTEN connection is gone: no more heartbeats; subscribers are ended so they reconnect.
    private func lose() {
        let ended = self.state.withLockedValue { state -> [AsyncStream<Message>.Continuation] in
            state.synced = false
            defer { state.subscribers.removeAll() }
            return Array(state.subscribers.values)
        }
        for continuation in ended { continuation.finish() }
    }

    private func heartbeats() async {
        var heartbeat = Message()
        heartbeat.synced = true
        var lastPurge = ContinuousClock.now - .seconds(3600)
        while !Task.isCancelled {
            try? await Task.sleep(for: self.heartbeatInterval)
            let purge = ContinuousClock.now - lastPurge >= .seconds(60)
            let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
            self.state.withLockedValue { state in
                guard state.synced else { return }
                // Entries past keep_until can no longer match an accepted token.
                if purge { state.entries = state.entries.filter { $0.value > nowMs } }
                self.revocations.apply(reset: false, sessions: [], synced: true)
                self.broadcast(&state, [heartbeat])
            }
            if purge {
                lastPurge = .now
                _ = try? await SessionStore().purgeRevokedSessions(in: self.database)
            }
        }
    }
}
