import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit

extension MatchService {
    /// The broadcast rules with this server's settings.
    var activityRules: ActivityRules {
        ActivityRules(
            durationMs: self.configuration.activityDuration.nanoseconds / 1_000_000,
            notifyIntervalMs: self.configuration.activityNotifyInterval.nanoseconds / 1_000_000
        )
    }

    /// `StartActivity`: the caller's broadcast, shown to their followers until it expires; when the caller's last
    /// start that told the followers is older than the notify interval, ActivityStarted events (followers' ids,
    /// at most 1000 per event) go to notify in the same transaction. Idempotent per idempotency key.
    func startActivity(_ request: MatchApi.StartActivityRequest, _ context: ServerContext) async throws
        -> MatchApi.StartActivityResponse
    {
        let user = try await self.access.requireUser(context)
        let activity = request.activity
        guard activity.utf8.count <= 64 else {
            throw MatchError.invalid("activity", "TOO_MANY_BYTES", "at most 64 bytes")
        }
        let key = request.idempotencyKey
        guard key.isEmpty || Self.isIdempotencyKey(key) else {
            throw MatchError.invalid("idempotency_key", "INVALID_FORMAT", "1..64 characters of [A-Za-z0-9_-]")
        }
        let rules = self.activityRules
        return try await self.database.withTransaction { transaction in
            try await self.activities.lockMember(user.id, in: transaction)
            if !key.isEmpty, let earlier = try await self.activities.started(by: user.id, key: key, in: transaction) {
                guard earlier.activity == activity else {
                    throw MatchError.invalid("idempotency_key", "IDEMPOTENCY_KEY_REUSED", "a new key for a new start")
                }
                let last = try await self.activities.lastNotified(by: user.id, in: transaction)
                return .with {
                    $0.broadcast = earlier.message
                    $0.followersNotified = earlier.notified
                    $0.nextNotifyUnixMs = (last ?? earlier.startedUnixMs) + rules.notifyIntervalMs
                    $0.replayed = true
                }
            }
            let settings = try await self.directory.settings(user.community, in: transaction)
            switch rules.refusal(activity: activity, settings: settings) {
            case .notAFollowCommunity?:
                throw MatchError(.notAFollowCommunity, "Activities are for communities where members follow each other")
            case .unknownActivity?:
                throw MatchError.invalid("activity", "NOT_IN_LIST", "one of the community's activities")
            case nil:
                break
            }
            guard try await self.directory.isVisible(user.id, in: user.community, on: transaction) else {
                throw MatchError(.profileRequired, "Complete your profile first")
            }
            let now = PostgresTimestamp.now
            let last = try await self.activities.lastNotified(by: user.id, in: transaction)
            let decision = rules.notifies(lastNotifiedUnixMs: last, nowUnixMs: now.millisecondsSinceEpoch)
            let broadcast = ActivityBroadcastRow(
                id: try UUIDv7.generate(),
                user: user.id,
                activity: activity,
                startedUnixMs: now.millisecondsSinceEpoch,
                expiresUnixMs: now.millisecondsSinceEpoch + rules.durationMs,
                notified: decision.notify
            )
            try await self.activities.start(
                broadcast,
                community: user.community,
                key: key.isEmpty ? broadcast.id : key,
                purgeBefore: PostgresTimestamp(
                    millisecondsSinceEpoch: rules.purgeBeforeUnixMs(nowUnixMs: broadcast.startedUnixMs)
                ),
                in: transaction
            )
            if decision.notify {
                // Told only where the policy lets the follower see the caller's card (blocks either way).
                let followers = try await self.activities.followers(of: user.id, in: transaction)
                    .filter { VisibilityPolicy.allows(.card, MemberRelation($0.facts)) }.map(\.follower)
                for share in stride(from: 0, to: followers.count, by: ActivityRules.followersPerEvent) {
                    var event = CommonApi.Event()
                    event.userId = user.id
                    event.communityId = user.community
                    event.payload = .activityStarted(
                        .with {
                            $0.broadcastId = broadcast.id
                            $0.activity = activity
                            $0.startedUnixMs = broadcast.startedUnixMs
                            $0.expiresUnixMs = broadcast.expiresUnixMs
                            $0.followerUserIds = Array(
                                followers[share..<min(share + ActivityRules.followersPerEvent, followers.count)]
                            )
                        }
                    )
                    try await self.outbox.append(event, in: transaction)
                }
            }
            return .with {
                $0.broadcast = broadcast.message
                $0.followersNotified = decision.notify
                $0.nextNotifyUnixMs = decision.nextNotifyUnixMs
            }
        }
    }

    /// `StopActivity`: ends the caller's active broadcast (none: an empty answer). Idempotent.
    func stopActivity(_ request: MatchApi.StopActivityRequest, _ context: ServerContext) async throws
        -> MatchApi.StopActivityResponse
    {
        let user = try await self.access.requireUser(context)
        let stopped = try await self.database.withTransaction { transaction in
            try await self.activities.lockMember(user.id, in: transaction)
            return try await self.activities.stop(user.id, at: .now, in: transaction)
        }
        return .with { $0.broadcastId = stopped ?? "" }
    }

    /// `ListFollowedActivities`: the active broadcasts of members the caller follows, newest first, of those
    /// whose card the policy lets the caller see (``VisibilityPolicy``: `card`; a connection keeps seeing a
    /// paused member, never a blocked, deactivated or deleted one).
    func listFollowedActivities(_ request: MatchApi.ListFollowedActivitiesRequest, _ context: ServerContext)
        async throws -> MatchApi.ListFollowedActivitiesResponse
    {
        let user = try await self.access.requireUser(context)
        guard request.pageSize == 0 || (1...50).contains(request.pageSize) else {
            throw MatchError.invalid("page_size", "OUT_OF_RANGE", "1..50, or 0 for 20")
        }
        let rows = try await self.activities.followed(by: user.id, of: user.community, at: .now, on: self.database)
        let shown = rows.lazy.filter { VisibilityPolicy.allows(.card, MemberRelation($0.facts)) }
            .prefix(request.pageSize == 0 ? 20 : Int(request.pageSize))
        return .with { $0.broadcasts = shown.map(\.broadcast.message) }
    }
}
