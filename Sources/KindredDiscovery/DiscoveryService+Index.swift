import Foundation
import KindredGRPC
import KindredGeo
import KindredPostgres
import KindredProto
import KindredServiceKit
import Logging
import NIOConcurrencyHelpers

/// The index's own calls: `IndexCandidate` and `RemoveCandidate` (one member), `RebuildIndex` (memory from the
/// tables, optionally after a backfill from profile) and the rebuild at start.
extension DiscoveryService {
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
                    states[stored.communityId] = self.index.fresh(CommunityRules(stored))
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
                    if states[snapshot.communityId] == nil { states[snapshot.communityId] = self.index.fresh(rules) }
                    states[snapshot.communityId]!.upsert(member, facts: facts)
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
}
