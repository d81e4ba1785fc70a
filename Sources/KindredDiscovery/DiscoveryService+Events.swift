import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import Logging

/// The event projection: `DeliverEvents` commits a batch of other services' events to discovery's tables and
/// then carries their effect into the index (the write path in `DiscoveryService+Projection.swift`).
extension DiscoveryService {
    /// `DeliverEvents`: auth's account events, profile's snapshots and communities, match's swipes, matches and
    /// blocks — each committed once with its id (the kit's inbox), then applied to the index.
    ///
    /// Not the kit's `EventInbox.deliver` (one transaction per event, nothing after it), because the index must
    /// follow PostgreSQL's commit order: the batch commits in one transaction (`processInOneTransaction`, which
    /// also checks the batch: at most 100 events, all from the caller) and its memory changes are applied after
    /// that commit, both under the writers' gate. A failed transaction acknowledges nothing (the producer retries).
    func deliverEvents(_ request: CommonApi.DeliverEventsRequest, _ context: ServerContext) async throws
        -> CommonApi.DeliverEventsResponse
    {
        try await EventInbox.deliver(request, from: Self.eventProducers, access: self.access, context) {
            try await self.applyEvents($0, from: $1)
        }
    }

    /// The producers whose events discovery applies.
    static let eventProducers: Set<String> = ["auth", "profile", "match"]

    /// Applies `producer`'s events (from `DeliverEvents` or the JetStream bus); returns the ids to acknowledge.
    func applyEvents(_ events: [CommonApi.Event], from producer: String) async throws -> [String] {
        // The whole batch in one transaction (each event in a savepoint; a partition stops at its first failure,
        // the rest of it comes again), then its memory changes in order, all under the gate so memory follows the
        // commit order. Events later in the batch see the earlier ones' changes through `PendingChanges`.
        let acknowledged: [String]
        do {
            acknowledged = try await self.gate.run {
                let (ids, pending) = try await self.inbox.processInOneTransaction(
                    events, from: producer, state: PendingChanges()
                ) { event, transaction, pending in
                    pending.record(try await self.effect(of: event, in: transaction, pending: pending))
                }
                for change in pending.changes { self.apply(change) }
                return ids
            }
        } catch let error as RPCError {
            throw error
        } catch {
            // The transaction itself failed (the database is away): nothing applied, the producer retries.
            self.logger.warning("event batch not applied", metadata: ["error.type": "\(type(of: error))"])
            acknowledged = []
        }
        self.eventCounter.increment(by: acknowledged.count)
        return acknowledged
    }

    /// One event's effect on discovery's tables, in the inbox's transaction; returns what memory must do after
    /// the commit. Malformed ids are ignored (acknowledged without effect).
    func effect(of event: CommonApi.Event, in transaction: PostgresTransaction, pending: PendingChanges) async throws
        -> [MemoryChange]
    {
        let user = event.userId.lowercased()
        let key = UserKey(uuidString: user)
        switch event.payload {
        case .profileUpdated(let updated)?:
            guard let snapshot = updated.snapshot else { return [] }
            return try await self.applySnapshot(snapshot, in: transaction, pending: pending)
        case .locationChanged(let changed)?:
            guard let snapshot = changed.snapshot else { return [] }
            return try await self.applySnapshot(snapshot, in: transaction, pending: pending)
        case .communityUpdated(let updated)?:
            guard let community = updated.community, !community.communityId.isEmpty else { return [] }
            guard try await self.store.upsertCommunity(community, in: transaction) else { return [] }
            let rules = CommunityRules(community)
            let reached = try await self.factsReached(by: rules, community: community.communityId, in: transaction, pending: pending)
            return [.rules(community.communityId, rules)] + reached
        case .accountDeactivated?:
            guard let key, UUIDv7.isValid(user) else { return [] }
            _ = try await self.store.setDeactivated(true, user: user, in: transaction)
            return [.remove(key)]
        case .accountReactivated?:
            guard let key, UUIDv7.isValid(user),
                let snapshot = try await self.store.setDeactivated(false, user: user, in: transaction)
            else { return [] }
            return try await self.placement(snapshot, user: key, in: transaction, pending: pending)
        case .accountDeleted?:
            guard let key, UUIDv7.isValid(user) else { return [] }
            try await self.store.erase(user, in: transaction)
            return [.erase(key)]
        case .swipeRecorded(let swipe)?:
            let target = swipe.targetUserId.lowercased()
            guard let key, let targetKey = UserKey(uuidString: target), UUIDv7.isValid(user), UUIDv7.isValid(target),
                UUIDv7.isValid(swipe.swipeId.lowercased())
            else { return [] }
            let community = pending.community(of: key, in: self.index) ?? event.communityId
            let learned = self.index.read(community) { $0.features(viewer: key, target: targetKey, nowUnixMs: Self.nowUnixMs) } ?? nil
            let row = SwipeRow(
                viewer: user, target: target, community: community, liked: swipe.action == .like,
                features: learned?.0, targetInterests: learned?.1 ?? InterestSet())
            let stored = try await self.store.recordSwipe(
                row, swipeId: swipe.swipeId.lowercased(),
                swipedUnixMs: swipe.swipedUnixMs > 0 ? swipe.swipedUnixMs : event.occurredUnixMs, in: transaction)
            return stored ? [.swipe(row)] : []
        case .swipeUndone(let undone)?:
            let target = undone.targetUserId.lowercased()
            guard UUIDv7.isValid(user), UUIDv7.isValid(target), UUIDv7.isValid(undone.swipeId.lowercased()),
                let row = try await self.store.deleteSwipe(
                    viewer: user, target: target, swipeId: undone.swipeId.lowercased(), in: transaction)
            else { return [] }
            return [.undo(row)]
        case .matchEnded(let ended)?:
            let pair = ended.userIds.map { $0.lowercased() }.sorted()
            guard pair.count == 2, pair.allSatisfy(UUIDv7.isValid), pair[0] != pair[1] else { return [] }
            // A deleted account's matches end with it: nothing to keep apart (and no row naming it may stay).
            guard ended.reason != .accountDeleted else { return [] }
            _ = try await self.store.exclude(ExclusionRow(user: pair[0], other: pair[1], kind: .endedMatch), in: transaction)
            return [.block(UserKey(uuidString: pair[0])!, UserKey(uuidString: pair[1])!)]
        case .userBlocked(let blocked)?:
            let other = blocked.blockedUserId.lowercased()
            guard let key, let otherKey = UserKey(uuidString: other), UUIDv7.isValid(user), UUIDv7.isValid(other),
                user != other
            else { return [] }
            _ = try await self.store.exclude(ExclusionRow(user: user, other: other, kind: .block), in: transaction)
            return [.block(key, otherKey)]
        case .userUnblocked(let unblocked)?:
            let other = unblocked.unblockedUserId.lowercased()
            guard let key, let otherKey = UserKey(uuidString: other), UUIDv7.isValid(user), UUIDv7.isValid(other)
            else { return [] }
            let stillApart = try await self.store.unblock(blocker: user, blocked: other, in: transaction)
            return stillApart ? [] : [.unblock(key, otherKey)]
        default:
            return []  // MatchCreated (both already swiped) and anything else: acknowledged all the same
        }
    }
}
