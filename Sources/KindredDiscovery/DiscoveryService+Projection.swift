import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import Logging
import NIOConcurrencyHelpers

/// What an applied change does to memory, decided inside the PostgreSQL transaction and carried out after the
/// commit (under the same `SerialGate`, so memory follows the commit order).
enum MemoryChange: Sendable {
    case place(IndexedMember, MemberFacts, community: String, relations: [SwipeRow], exclusions: [ExclusionRow])
    case remove(UserKey)
    case erase(UserKey)
    case rules(String, CommunityRules)
    case swipe(SwipeRow)
    case undo(SwipeRow)
    case block(UserKey, UserKey)
    case unblock(UserKey, UserKey)
}

/// A batch's memory changes so far (applied after its commit), and what later events of the batch must see
/// of them: who is indexed in which community, and communities' new rules.
struct PendingChanges: Sendable {
    private(set) var changes: [MemoryChange] = []
    private var communityOf: [UserKey: String?] = [:]
    private(set) var rules: [String: CommunityRules] = [:]

    mutating func record(_ new: [MemoryChange]) {
        self.changes += new
        for change in new {
            switch change {
            case .place(let member, _, let community, _, _): self.communityOf[member.user] = .some(community)
            case .remove(let user), .erase(let user): self.communityOf[user] = .some(nil)
            case .rules(let community, let rules): self.rules[community] = rules
            case .swipe, .undo, .block, .unblock: break
            }
        }
    }

    /// The community `user` will be indexed in once the batch's changes are applied.
    func community(of user: UserKey, in index: DiscoveryIndex) -> String? {
        if let pending = self.communityOf[user] { return pending }
        return index.community(of: user)
    }
}

extension DiscoveryService {
    // MARK: Events

    /// `DeliverEvents`: auth's account events, profile's snapshots and communities, match's swipes, matches and
    /// blocks — each committed once with its id (the kit's inbox), then applied to the index.
    func deliverEvents(_ request: CommonApi.DeliverEventsRequest, _ context: ServerContext) async throws
        -> CommonApi.DeliverEventsResponse
    {
        let producer = try await self.access.requireService(["auth", "profile", "match"], context)
        guard request.events.count <= 100 else {
            throw DiscoveryError.invalid("events", "TOO_MANY", "at most 100 events per call")
        }
        guard request.events.allSatisfy({ $0.producer == producer }) else {
            throw DiscoveryError.invalid("events", "WRONG_PRODUCER", "events must come from their producer")
        }
        // The whole batch in one transaction (each event in a savepoint; a partition stops at its first failure,
        // the rest of it comes again), then its memory changes in order, all under the gate so memory follows the
        // commit order. Events later in the batch see the earlier ones' changes through `PendingChanges`.
        let acknowledged: [String]
        do {
            acknowledged = try await self.gate.run {
                let (ids, pending) = try await self.inbox.processInOneTransaction(
                    request.events, from: producer, state: PendingChanges()
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
        var response = CommonApi.DeliverEventsResponse()
        response.acknowledgedEventIds = acknowledged
        return response
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
            return [.rules(community.communityId, CommunityRules(community))]
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

    /// Stores a newer snapshot and says how the index changes.
    func applySnapshot(
        _ snapshot: CommonApi.CandidateSnapshot, in transaction: PostgresTransaction, pending: PendingChanges = PendingChanges()
    ) async throws -> [MemoryChange] {
        var snapshot = snapshot
        snapshot.userId = snapshot.userId.lowercased()
        guard UUIDv7.isValid(snapshot.userId), let key = UserKey(uuidString: snapshot.userId),
            !snapshot.communityId.isEmpty
        else { return [] }
        let (applied, deactivated) = try await self.store.upsertCandidate(snapshot, in: transaction)
        guard applied else { return [] }
        if deactivated { return [.remove(key)] }
        return try await self.placement(snapshot, user: key, in: transaction, pending: pending)
    }

    /// An active member's snapshot as an index change: placed (with their swipes and blocks from PostgreSQL when
    /// they are not in the index now) or removed (ineligible, no location).
    func placement(
        _ snapshot: CommonApi.CandidateSnapshot, user: UserKey, in transaction: PostgresTransaction, pending: PendingChanges
    ) async throws -> [MemoryChange] {
        var rules = pending.rules[snapshot.communityId] ?? self.index.read(snapshot.communityId) { $0.rules }
        if rules == nil, let community = try await self.store.community(snapshot.communityId, in: transaction) {
            rules = CommunityRules(community)
        }
        switch MemberBuilder.member(
            snapshot, rules: rules ?? CommunityRules(), user: user, offset: self.configuration.locationOffset) {
        case .failure: return [.remove(user)]
        case .success(let (member, facts)):
            var relations: [SwipeRow] = []
            var exclusions: [ExclusionRow] = []
            if pending.community(of: user, in: self.index) != snapshot.communityId {
                (relations, exclusions) = try await self.store.relations(of: snapshot.userId, in: transaction)
            }
            return [.place(member, facts, community: snapshot.communityId, relations: relations, exclusions: exclusions)]
        }
    }

    /// Carries out a committed change in memory.
    func apply(_ change: MemoryChange) {
        switch change {
        case .place(let member, let facts, let community, let relations, let exclusions):
            self.index.place(member, facts: facts, community: community)
            self.index.write(community) { state in
                for swipe in relations {
                    guard let v = UserKey(uuidString: swipe.viewer), let t = UserKey(uuidString: swipe.target) else { continue }
                    state.index.recordSwipe(viewer: v, target: t, liked: swipe.liked)
                }
                for exclusion in exclusions {
                    guard let a = UserKey(uuidString: exclusion.user), let b = UserKey(uuidString: exclusion.other) else { continue }
                    state.index.block(a, b)
                }
            }
        case .remove(let user):
            self.index.remove(user)
        case .erase(let user):
            self.index.erase(user)
        case .rules(let community, let rules):
            self.index.write(community) { $0.rules = rules }
        case .swipe(let swipe):
            guard let v = UserKey(uuidString: swipe.viewer), let t = UserKey(uuidString: swipe.target) else { return }
            self.index.write(swipe.community) { state in
                state.index.recordSwipe(viewer: v, target: t, liked: swipe.liked)
                if let features = swipe.features {
                    state.learn(viewer: v, target: t, features: features, interests: swipe.targetInterests, liked: swipe.liked)
                }
            }
        case .undo(let swipe):
            guard let v = UserKey(uuidString: swipe.viewer), let t = UserKey(uuidString: swipe.target) else { return }
            self.index.write(swipe.community) { state in
                state.index.undoSwipe(viewer: v, target: t)
                if let features = swipe.features {
                    state.unlearn(viewer: v, target: t, features: features, interests: swipe.targetInterests, liked: swipe.liked)
                }
            }
        case .block(let a, let b):
            guard let community = self.index.community(of: a), self.index.community(of: b) == community else { return }
            self.index.write(community) { $0.index.block(a, b) }
        case .unblock(let a, let b):
            guard let community = self.index.community(of: a), self.index.community(of: b) == community else { return }
            self.index.write(community) { $0.index.unblock(a, b) }
        }
    }

    // MARK: Index calls

    /// `IndexCandidate` (profile's service token, a backfill, or an admin): applies a snapshot like a
    /// ProfileUpdated event; older versions change nothing.
    func indexCandidate(_ request: DiscoveryApi.IndexCandidateRequest, _ context: ServerContext) async throws
        -> DiscoveryApi.IndexCandidateResponse
    {
        try await self.access.requireAdminOrService(context, services: ["profile"])
        guard let snapshot = request.snapshot, UUIDv7.isValid(snapshot.userId.lowercased()) else {
            throw DiscoveryError.invalid("snapshot.user_id", "INVALID_FORMAT", "a user id")
        }
        guard !snapshot.communityId.isEmpty else {
            throw DiscoveryError.invalid("snapshot.community_id", "REQUIRED", "the profile's community")
        }
        guard snapshot.geohashCell.isEmpty || (snapshot.geohashCell.count == 6 && Geohash.decode(snapshot.geohashCell) != nil)
        else {
            throw DiscoveryError.invalid("snapshot.geohash_cell", "INVALID_FORMAT", "a precision-6 geohash or empty")
        }
        var response = DiscoveryApi.IndexCandidateResponse()
        response.applied = try await self.gate.run {
            let changes = try await self.database.withTransaction { transaction in
                try await self.applySnapshot(snapshot, in: transaction)
            }
            for change in changes { self.apply(change) }
            return !changes.isEmpty
        }
        return response
    }

    /// `RemoveCandidate` (service or admin): the member leaves the index until a newer eligible snapshot.
    func removeCandidate(_ request: DiscoveryApi.RemoveCandidateRequest, _ context: ServerContext) async throws
        -> DiscoveryApi.RemoveCandidateResponse
    {
        try await self.access.requireAdminOrService(context, services: ["profile", "auth", "match"])
        let user = try Self.userKey(request.userId, field: "user_id")
        guard request.reason.count <= 32 else {
            throw DiscoveryError.invalid("reason", "TOO_LONG", "at most 32 characters")
        }
        var response = DiscoveryApi.RemoveCandidateResponse()
        response.removed = try await self.gate.run {
            _ = try await self.database.withTransaction { transaction in
                try await self.store.markIneligible(user.uuidString, in: transaction)
            }
            return self.index.remove(user)
        }
        if response.removed {
            self.logger.info("candidate removed", metadata: ["discovery.reason": "\(request.reason)"])
        }
        return response
    }

    /// `RebuildIndex` (admin): optionally backfills snapshots from profile, then rebuilds memory from the tables.
    func rebuildIndex(_ request: DiscoveryApi.RebuildIndexRequest, _ context: ServerContext) async throws
        -> DiscoveryApi.RebuildIndexResponse
    {
        try await self.access.requireAdmin(context)
        let start = ContinuousClock.now
        let alreadyRunning = self.rebuilding.withLockedValue { running in
            defer { running = true }
            return running
        }
        guard !alreadyRunning else { throw DiscoveryError(.rebuildRunning, "A rebuild is already running") }
        defer { self.rebuilding.withLockedValue { $0 = false } }
        let community = request.communityId.isEmpty ? nil : request.communityId
        var backfilled: Int64 = 0
        if request.backfillFromProfile { backfilled = try await self.backfill(community: community) }
        let indexed = try await self.rebuild(community: community)
        var response = DiscoveryApi.RebuildIndexResponse()
        response.indexedCandidates = Int64(indexed)
        response.backfilledSnapshots = backfilled
        response.tookMs = (ContinuousClock.now - start).components.seconds * 1000
            + (ContinuousClock.now - start).components.attoseconds / 1_000_000_000_000_000
        return response
    }

    /// Pages through profile's ListProfileIndexEntries with discovery's service token and applies each snapshot.
    func backfill(community: String?) async throws -> Int64 {
        guard let tokens = self.auth.serviceTokens else {
            throw DiscoveryError(.unavailable, "No service token: set KINDRED_DISCOVERY_SERVICE_SECRET")
        }
        var request = Kindred.Profile.V1.ListProfileIndexEntriesRequest()
        request.communityId = community ?? ""
        request.includeIneligible = true
        request.pageSize = 1000
        var applied: Int64 = 0
        repeat {
            let token = try await tokens.token()
            let page = try await self.profile.unary(
                Kindred.Profile.V1.ProfileService.Method.listProfileIndexEntries, request,
                metadata: ["authorization": .string("Bearer " + token)])
            try await self.gate.run {
                for snapshot in page.entries {
                    let changes = try await self.database.withTransaction { transaction in
                        try await self.applySnapshot(snapshot, in: transaction)
                    }
                    if !changes.isEmpty { applied += 1 }
                }
            }
            request.pageToken = page.nextPageToken
        } while !request.pageToken.isEmpty
        return applied
    }

    /// Rebuilds memory from PostgreSQL (all communities, or one): members, then swipes in the order they were
    /// learned from (the models replay exactly), then blocks and ended matches. Returns the members indexed.
    ///
    /// One read-only snapshot streamed through cursors (no statement timeout: this admin path reads millions of
    /// rows), the next page fetched while the current one is decoded; swipes and blocks are collected as slot
    /// pairs and each member's lists built once (`CommunityIndex.load`); the models learn from every swipe as the
    /// events did (per-member sums; the population slopes refitted on the same schedule).
    public func rebuild(community: String?) async throws -> Int {
        try await self.gate.run {
            let page = self.configuration.rebuildPage
            let states = try await self.store.rebuildTransaction(on: self.database) { transaction in
                var states: [String: CommunityState] = [:]
                for stored in try await self.store.communities(only: community, in: transaction) {
                    states[stored.communityId] = CommunityState(rules: CommunityRules(stored))
                }
                var phase = ContinuousClock.now
                var took: [String: Logger.MetadataValue] = [:]
                func lap(_ name: String) {
                    took["discovery.rebuild_\(name)_ms"] = "\((ContinuousClock.now - phase) / .milliseconds(1))"
                    phase = ContinuousClock.now
                }
                defer { self.logger.info("index rebuilt", metadata: took) }
                try await self.store.streamCandidates(only: community, page: page, in: transaction) { key, snapshot in
                    let rules = states[snapshot.communityId]?.rules ?? CommunityRules()
                    guard case .success(let (member, facts)) = MemberBuilder.member(
                        snapshot, rules: rules, user: key, offset: self.configuration.locationOffset)
                    else { return }
                    states[snapshot.communityId, default: CommunityState(rules: rules)].upsert(member, facts: facts)
                }
                // Slots by place: a deck then reads its candidates' per-slot data nearly in sequence. Then the
                // taste directions from every member, before the swipes are replayed in them.
                for key in states.keys {
                    states[key]!.arrangeByPlace()
                    states[key]!.refreshTasteBasis()
                }
                lap("members")
                var swipes: [String: SlotSwipes] = [:]
                try await self.store.streamSwipes(only: community, page: page, in: transaction) { swipe in
                    guard states[swipe.community] != nil else { return }
                    if let v = states[swipe.community]!.index.slot(of: swipe.viewer),
                        let t = states[swipe.community]!.index.slot(of: swipe.target)
                    {
                        swipes[swipe.community, default: SlotSwipes()].append(viewer: v, target: t, liked: swipe.liked)
                    }
                    if let features = swipe.features {
                        states[swipe.community]!.learn(
                            viewer: swipe.viewer, target: swipe.target, features: features,
                            interests: swipe.targetInterests, liked: swipe.liked)
                    }
                }
                lap("swipes")
                var blocks: [String: [(Int32, Int32)]] = [:]
                try await self.store.streamExclusions(page: page, in: transaction) { a, b in
                    // The community holding both (communities are few; exclusions far fewer than members).
                    for (owner, state) in states {
                        guard let x = state.index.slot(of: a) else { continue }
                        if let y = state.index.slot(of: b) { blocks[owner, default: []].append((x, y)) }
                        return
                    }
                }
                lap("exclusions")
                for key in states.keys {
                    states[key]!.index.load(swipes: swipes.removeValue(forKey: key) ?? SlotSwipes(), blocks: blocks.removeValue(forKey: key) ?? [])
                }
                lap("lists_and_models")
                return states
            }
            self.index.replace(with: states, only: community)
            self.built.withLockedValue { $0 = true }
            return states.values.reduce(0) { $0 + $1.index.count }
        }
    }

    // MARK: Footprint

    /// `GetUserFootprint` (admin or service): rows discovery holds about a user, per kind, zeros included.
    func getUserFootprint(_ request: CommonApi.GetUserFootprintRequest, _ context: ServerContext) async throws
        -> CommonApi.GetUserFootprintResponse
    {
        try await self.access.requireAdminOrService(context)
        let user = try Self.userKey(request.userId, field: "user_id")
        return .init(counts: try await self.store.footprint(user.uuidString, on: self.database))
    }
}
