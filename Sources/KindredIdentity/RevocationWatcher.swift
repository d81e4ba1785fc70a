import Foundation
import KindredGRPC
import KindredProto
import Logging
import NIOConcurrencyHelpers

/// Keeps a `RevokedSessions` set up to date from auth's `WatchRevokedSessions` stream: subscribes with a
/// service token, applies the snapshot and every session end as it arrives, and reconnects (100 ms doubling to
/// 2 s) when the stream ends, fails, or is silent for longer than the set's bound. While it is disconnected the
/// set goes stale after that bound and its authenticator answers UNAVAILABLE (fail closed).
public final class RevocationWatcher: Sendable {
    private let client: GRPCClient
    private let revocations: RevokedSessions
    private let serviceToken: @Sendable () async throws -> String
    private let logger: Logger
    /// Streams are renewed this often (a fresh service token and snapshot).
    private let streamLifetime: Duration

    public init(
        client: GRPCClient,
        revocations: RevokedSessions,
        streamLifetime: Duration = .seconds(600),
        logger: Logger,
        serviceToken: @escaping @Sendable () async throws -> String
    ) {
        self.client = client
        self.revocations = revocations
        self.serviceToken = serviceToken
        self.streamLifetime = streamLifetime
        self.logger = logger
    }

    private struct Silent: Error {}

    /// Runs until the task is cancelled.
    public func run() async {
        var delay: Duration = .milliseconds(100)
        var failures = 0
        while !Task.isCancelled {
            let heard = NIOLockedValueBox(false)
            do {
                try await self.watchOnce(heard: heard)
            } catch let error as RPCError where error.code == .deadlineExceeded && heard.withLockedValue({ $0 }) {
                // The stream's planned end (`streamLifetime`): reconnect for a fresh token and snapshot.
            } catch {
                if !Task.isCancelled && failures == 0 {
                    self.logger.warning(
                        "revocation stream lost; reconnecting",
                        metadata: ["error.type": "\(type(of: error))", "error": "\(error)"]
                    )
                }
            }
            if heard.withLockedValue({ $0 }) {
                delay = .milliseconds(100)
                failures = 0
            } else {
                failures += 1
            }
            if Task.isCancelled { return }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(2))
        }
    }

    /// One subscription: until the stream ends, fails or stays silent longer than the bound.
    private func watchOnce(heard: NIOLockedValueBox<Bool>) async throws {
        let token = try await self.serviceToken()
        let lastMessage = NIOLockedValueBox(ContinuousClock.now)
        let bound = self.revocations.staleAfter
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await self.client.serverStreaming(
                    Kindred.Auth.V1.AuthService.Method.watchRevokedSessions,
                    Kindred.Auth.V1.WatchRevokedSessionsRequest(),
                    metadata: ["authorization": .string("Bearer " + token)],
                    options: CallOptions(timeout: self.streamLifetime)
                ) { stream in
                    for try await message in stream {
                        lastMessage.withLockedValue { $0 = .now }
                        heard.withLockedValue { $0 = true }
                        self.revocations.apply(
                            reset: message.reset,
                            sessions: message.sessions.map { ($0.sessionId, $0.keepUntilUnixMs) },
                            synced: message.synced
                        )
                    }
                }
            }
            group.addTask {
                // A stream that stays open but silent (no heartbeat) is as good as lost: reconnect.
                while true {
                    try await Task.sleep(for: .milliseconds(500))
                    if ContinuousClock.now - lastMessage.withLockedValue({ $0 }) > bound { throw Silent() }
                }
            }
            try await group.next()
            group.cancelAll()
        }
    }
}
