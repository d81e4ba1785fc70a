import Foundation
import NIOConcurrencyHelpers

/// What a verifier knows about ended sessions: their ids (with the time until which one of their access tokens
/// could still be unexpired) and when the feed last told it that this knowledge is complete.
///
/// A value-type state machine, fed by `WatchRevokedSessions` (or, in auth itself, by LISTEN/NOTIFY) and asked
/// once per call; no I/O. The verdict fails closed: a session is `live` only while the feed was heard within
/// `staleAfter`.
public struct RevocationState: Sendable {
    /// The answer for one session id.
    public enum Verdict: Sendable, Equatable {
        /// Not ended, as far as a feed heard within the bound knows.
        case live
        /// Ended: refuse its tokens (UNAUTHENTICATED).
        case revoked
        /// The feed has not been heard within the bound (or never): refuse with UNAVAILABLE.
        case unknown
    }

    /// How long after the last synced message the set is still trusted.
    public let staleAfter: Duration
    /// Session id → keep until (UTC ms).
    private(set) var revoked: [String: Int64] = [:]
    /// A snapshot being received (from its `reset` chunk to its `synced` one). It replaces `revoked` only when
    /// complete, so the old set stays trusted (within the bound) meanwhile; both count as ended.
    private var staging: [String: Int64]?
    /// The last synced message (nil until the first snapshot is complete).
    private(set) var syncedAt: ContinuousClock.Instant?
    private var lastPurgeMs: Int64 = 0

    public init(staleAfter: Duration) {
        self.staleAfter = staleAfter
    }

    /// Number of ended sessions known.
    public var count: Int { self.revoked.count }

    /// Applies one message of the feed: `reset` starts a new snapshot, which replaces the set once its `synced`
    /// message arrives; `synced` means the set is complete as of `now`.
    public mutating func apply(
        reset: Bool,
        sessions: some Sequence<(id: String, keepUntilMs: Int64)>,
        synced: Bool,
        now: ContinuousClock.Instant,
        nowMs: Int64
    ) {
        if reset { self.staging = [:] }
        for session in sessions where session.keepUntilMs > nowMs {
            if self.staging != nil {
                self.staging![session.id] = max(self.staging![session.id] ?? 0, session.keepUntilMs)
            } else {
                self.revoked[session.id] = max(self.revoked[session.id] ?? 0, session.keepUntilMs)
            }
        }
        if synced {
            if let staging = self.staging {
                self.revoked = staging
                self.staging = nil
            }
            self.syncedAt = now
        }
        // Expired entries can no longer match an accepted token; drop them about once a minute.
        if nowMs - self.lastPurgeMs >= 60_000 {
            self.lastPurgeMs = nowMs
            self.revoked = self.revoked.filter { $0.value > nowMs }
        }
    }

    public func verdict(_ sessionID: String, now: ContinuousClock.Instant) -> Verdict {
        if self.revoked[sessionID] != nil || self.staging?[sessionID] != nil { return .revoked }
        guard let syncedAt = self.syncedAt, now - syncedAt <= self.staleAfter else { return .unknown }
        return .live
    }
}

/// The ended sessions one process knows, shared by its `CallerAuthenticator` (one lock and one dictionary
/// lookup per call) and the task that feeds it.
public final class RevokedSessions: Sendable {
    private let state: NIOLockedValueBox<RevocationState>

    /// `staleAfter`: how long without a synced message from the feed before tokens with a session are refused
    /// with UNAVAILABLE (fail closed).
    public init(staleAfter: Duration = .seconds(5)) {
        self.state = NIOLockedValueBox(RevocationState(staleAfter: staleAfter))
    }

    public var staleAfter: Duration { self.state.withLockedValue { $0.staleAfter } }

    public func apply(reset: Bool, sessions: [(id: String, keepUntilMs: Int64)], synced: Bool) {
        let now = ContinuousClock.now
        let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
        self.state.withLockedValue {
            $0.apply(reset: reset, sessions: sessions, synced: synced, now: now, nowMs: nowMs)
        }
    }

    public func verdict(_ sessionID: String) -> RevocationState.Verdict {
        let now = ContinuousClock.now
        return self.state.withLockedValue { $0.verdict(sessionID, now: now) }
    }

    /// Whether the feed was heard within the bound (for health and metrics).
    public var isFresh: Bool {
        let now = ContinuousClock.now
        return self.state.withLockedValue { state in
            state.syncedAt.map { now - $0 <= state.staleAfter } ?? false
        }
    }

    public var count: Int { self.state.withLockedValue { $0.count } }
}
