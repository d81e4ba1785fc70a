import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit

extension NotifyService {
    /// `DeliverEvents`: what notify learns from the other services, each effect committed with the event id.
    /// auth: deletion erases the member's devices, settings and notifications, deactivation cancels what is pending
    /// to or about them; match: MatchCreated queues one notification for each side, MatchEnded (unmatch) and
    /// UserBlocked cancel what is pending between the two, UserBlocked and UserUnblocked are recorded
    /// (`BlockStore`) so that nothing is queued or counted about a pair blocked either way, whichever event came
    /// first; chat: MessageSent queues (or updates) the recipient's
    /// notification of the thread (`NotifyService+Messages.swift`); match's SwipeRecorded (a like) and
    /// ReportResolved feed the likes digest and the report outcome (`NotifyService+Digest.swift`); a block, an
    /// unmatch, a match and a deactivation take likes out of a waiting digest.
    ///
    /// Producers are not ordered with one another: an event naming a member whose AccountDeleted came first is
    /// dropped (acknowledged, nothing stored), against the tombstone the deletion left (`DeletedMemberStore`).
    func deliverEvents(_ request: Kindred.Common.V1.DeliverEventsRequest, _ context: ServerContext) async throws
        -> Kindred.Common.V1.DeliverEventsResponse
    {
        try await EventInbox.deliver(request, from: Self.eventProducers, access: self.access, context) {
            try await self.applyEvents($0, from: $1)
        }
    }

    /// The producers whose events notify applies.
    static let eventProducers: Set<String> = ["auth", "match", "chat"]

    /// Applies `producer`'s events (from `DeliverEvents` or the JetStream bus); returns the ids to acknowledge.
    /// The whole batch is one transaction (one commit; an event that fails is rolled back alone and holds its
    /// partition), which first takes the locks its events will need in one order (``EventBatchLocks``), then reads
    /// what every event is checked against (``EventBatchFacts``). A failure of the transaction itself (the database
    /// away) applies and acknowledges nothing: the producer delivers the batch again.
    func applyEvents(_ events: [Kindred.Common.V1.Event], from producer: String) async throws -> [String] {
        let locks = EventBatchLocks(events)
        let applied: [String]
        do {
            applied = try await self.inbox.processInOneTransaction(
                events, from: producer, state: EventBatchFacts(),
                prepare: { transaction, facts in
                    try await locks.take(in: transaction, of: self)
                    facts = try await self.facts(of: locks, in: transaction)
                }
            ) { event, transaction, facts in
                try await self.apply(event, holding: locks, facts: &facts, in: transaction)
            }.acknowledged
        } catch let error as RPCError {
            throw error
        } catch {
            self.logger.warning("event batch not applied", metadata: ["error.type": "\(type(of: error))"])
            applied = []
        }
        if !applied.isEmpty { self.sendWakeup.wake() }
        return applied
    }

    /// What a batch's events are checked against, read once the batch holds its locks.
    func facts(of locks: EventBatchLocks, in transaction: PostgresTransaction) async throws -> EventBatchFacts {
        EventBatchFacts(
            deleted: try await self.deletedMembers.deleted(among: locks.members, in: transaction),
            endpoints: try await WebhookStore().enabledEndpointsByType(in: transaction))
    }

    /// Whether `event` names a member with a tombstone: from the batch's facts, or for members the batch holds no
    /// lock of (an event without a payload) looked up alone, their locks taken first.
    private func namesDeletedMember(
        _ event: Kindred.Common.V1.Event, holding held: EventBatchLocks, facts: EventBatchFacts,
        in transaction: PostgresTransaction
    ) async throws -> Bool {
        let named = Self.members(namedBy: event)
        guard held.holds(members: named) else {
            return try await self.deletedMembers.containsAny(of: named, in: transaction)
        }
        return !facts.deleted.isDisjoint(with: named)
    }

    /// One event, in its batch's transaction; `held`: the locks the batch took first (``EventBatchLocks``), `facts`:
    /// what it read then (``EventBatchFacts``; a deletion adds its member).
    func apply(
        _ event: Kindred.Common.V1.Event, holding held: EventBatchLocks, facts: inout EventBatchFacts,
        in transaction: PostgresTransaction
    ) async throws {
        let subject = event.userId.lowercased()
        let isDeletion = if case .accountDeleted? = event.payload { true } else { false }
        if !isDeletion, try await self.namesDeletedMember(event, holding: held, facts: facts, in: transaction) {
            self.logger.debug("event about a deleted member dropped", metadata: ["event.id": "\(event.eventId)"])
            return
        }
        try await self.fanOutToWebhooks(event, endpoints: facts.endpoints, in: transaction)
        switch event.payload {
        case .accountDeleted?:
            guard UUIDv7.isValid(subject) else { return }
            try await self.erase(subject, in: transaction)
            try await self.deletedMembers.record(subject, in: transaction)
            facts.deleted.insert(subject)
        case .accountDeactivated?:
            guard UUIDv7.isValid(subject) else { return }
            try await self.notifications.cancelPending(involving: subject, in: transaction)
            try await self.digests.forget(likesBy: subject, in: transaction)
        case .matchCreated(let match)?:
            try await self.queueMatch(match, holding: held, in: transaction)
            let users = match.userIds.map { $0.lowercased() }
            if users.count == 2, users.allSatisfy(UUIDv7.isValid) {
                try await self.digests.forget(between: users[0], and: users[1], in: transaction)
            }
        case .messageSent(let message)?:
            try await self.queueMessage(message, from: subject, holding: held, in: transaction)
        case .matchEnded(let ended)?:
            let users = ended.userIds.map { $0.lowercased() }
            guard users.count == 2, users.allSatisfy(UUIDv7.isValid) else { return }
            try await self.notifications.cancelPending(between: users[0], and: users[1], in: transaction)
            try await self.digests.forget(between: users[0], and: users[1], in: transaction)
        case .userBlocked(let blocked)?:
            let other = blocked.blockedUserId.lowercased()
            guard UUIDv7.isValid(subject), UUIDv7.isValid(other), subject != other else { return }
            if !held.holds(pair: subject, other) { try await self.blocks.lock(between: subject, and: other, in: transaction) }
            let unheld = [subject, other].filter { !held.holds(activitiesOf: $0) }.sorted()
            try await self.activityNotifications.lock(activitiesOf: unheld, in: transaction)
            // An older block than the row's (redelivered after a newer unblock) changes nothing.
            guard
                try await self.blocks.record(
                    blocker: subject, blocked: other, active: true, sequence: event.sequence, in: transaction)
            else { return }
            try await self.notifications.cancelPending(between: subject, and: other, in: transaction)
            try await self.digests.forget(between: subject, and: other, in: transaction)
        case .userUnblocked(let unblocked)?:
            let other = unblocked.unblockedUserId.lowercased()
            guard UUIDv7.isValid(subject), UUIDv7.isValid(other), subject != other else { return }
            if !held.holds(pair: subject, other) { try await self.blocks.lock(between: subject, and: other, in: transaction) }
            try await self.blocks.record(
                blocker: subject, blocked: other, active: false, sequence: event.sequence, in: transaction)
        case .swipeRecorded(let swipe)?:
            try await self.countLike(swipe, by: subject, holding: held, in: transaction)
        case .reportResolved(let resolved)?:
            try await self.queueReportOutcome(resolved, reporter: subject, in: transaction)
        case .activityStarted(let started)?:
            try await self.queueActivity(started, by: subject, holding: held, in: transaction)
        default:
            break  // irrelevant here: acknowledged all the same
        }
    }

    /// The members an event names (its subject and the other members of its payload), lowercased, valid ids only.
    static func members(namedBy event: Kindred.Common.V1.Event) -> [String] {
        var named = [event.userId]
        switch event.payload {
        case .matchCreated(let match)?: named += match.userIds
        case .matchEnded(let ended)?: named += ended.userIds
        case .messageSent(let message)?: named.append(message.recipientUserId)
        case .swipeRecorded(let swipe)?: named.append(swipe.targetUserId)
        case .userBlocked(let blocked)?: named.append(blocked.blockedUserId)
        case .userUnblocked(let unblocked)?: named.append(unblocked.unblockedUserId)
        default: break
        }
        return Array(Set(named.map { $0.lowercased() }.filter(UUIDv7.isValid))).sorted()
    }

    /// Deletes tombstones of deleted members, and the rows of lifted blocks, once no producer retries an event about
    /// them any more (older than the inbox's retention of event ids), at start and every hour, until the server stops.
    func purgeTombstones() async {
        while !Task.isCancelled {
            do {
                try await self.deletedMembers.purge(olderThan: self.inbox.retention, in: self.database)
                try await self.blocks.purge(liftedBefore: self.inbox.retention, in: self.database)
            } catch {
                self.logger.warning("tombstone purge failed", metadata: ["error.type": "\(type(of: error))"])
            }
            try? await Task.sleep(for: .seconds(3600))
        }
    }

    /// A new match or connection: one notification for each side who wants them, about the other, with a stable
    /// id (a redelivered event queues nothing more); nothing when either blocked the other (the block came first).
    func queueMatch(
        _ match: Kindred.Common.V1.MatchCreated, holding held: EventBatchLocks, in transaction: PostgresTransaction
    ) async throws {
        let users = match.userIds.map { $0.lowercased() }
        guard users.count == 2, users[0] != users[1], users.allSatisfy(UUIDv7.isValid), UUIDv7.isValid(match.matchId) else {
            self.logger.error("MatchCreated without a valid pair: ignored")
            return
        }
        if !held.holds(pair: users[0], users[1]) {
            try await self.blocks.lock(between: users[0], and: users[1], in: transaction)
        }
        guard try await !self.blocks.isBlocked(between: users[0], and: users[1], in: transaction) else { return }
        for (user, other) in [(users[0], users[1]), (users[1], users[0])] {
            let preferences = try await self.settings.preferences(of: user, in: transaction)
            guard NotificationKind.newMatch.isWanted(by: preferences) else { continue }
            try await self.notifications.enqueue(
                id: try UUIDv7.generate(), to: user, kind: .newMatch, about: other, source: match.matchId.lowercased(),
                collapseKey: "match-" + match.matchId.lowercased(), connection: match.mode == .oneWay, in: transaction)
        }
    }

    /// Account deletion: the member's devices, settings and every notification to or about them go. Afterwards
    /// `GetUserFootprint` counts zero.
    func erase(_ user: String, in transaction: PostgresTransaction) async throws {
        try await self.devices.deleteAll(of: user, in: transaction)
        try await self.settings.delete(user, in: transaction)
        try await self.digests.erase(user, in: transaction)
        try await self.blocks.erase(user, in: transaction)
        try await self.notifications.erase(user, in: transaction)
        try await self.eraseWebhookDeliveries(of: user, in: transaction)
    }

    /// `GetUserFootprint`: rows notify holds about a user, per kind (zeros included). Admins and services.
    func getUserFootprint(_ request: Kindred.Common.V1.GetUserFootprintRequest, _ context: ServerContext) async throws
        -> Kindred.Common.V1.GetUserFootprintResponse
    {
        try await self.access.requireAdminOrService(context)
        guard UUIDv7.isValid(request.userId) else {
            throw NotifyError.invalid("user_id", "MALFORMED", "a user id")
        }
        let user = request.userId.lowercased()
        return .init(counts: [
            ("devices", try await self.devices.count(of: user, in: self.database)),
            ("settings", try await self.settings.count(of: user, in: self.database)),
            ("notifications", try await self.notifications.count(involving: user, in: self.database)),
            ("digest_likes", try await self.digests.count(involving: user, in: self.database)),
            ("blocks", try await self.blocks.count(involving: user, in: self.database)),
            ("webhook_deliveries", try await self.webhookDeliveryCount(naming: user)),
        ])
    }
}
