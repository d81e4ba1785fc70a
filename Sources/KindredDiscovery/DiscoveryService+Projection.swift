import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import Logging
import NIOConcurrencyHelpers

/// The projection's write path, shared by events (`DiscoveryService+Events.swift`), the index calls and the
/// rebuild's backfill (`DiscoveryService+Index.swift`): a snapshot becomes index changes (`MemoryChange`), decided
/// in the PostgreSQL transaction and carried out in memory after its commit.
extension DiscoveryService {
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
    /// they are not in the index now, or move into one of this shard's cells) or removed (ineligible, no location).
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
            if pending.needsRelations(member, community: snapshot.communityId, in: self.index) {
                (relations, exclusions) = try await self.store.relations(of: snapshot.userId, in: transaction)
            }
            return [.place(member, facts, community: snapshot.communityId, relations: relations, exclusions: exclusions)]
        }
    }

    /// With shards, a community's wider reach (a larger `max_radius_km`) brings members into this shard's region
    /// whose filter facts it did not keep (`CommunityState.facts`): they are built from their snapshots in the
    /// projection under the rules before the change, as the index built them when it placed the members (profile's
    /// re-announcement after the change brings them under the new rules, here as in one index).
    func factsReached(
        by rules: CommunityRules, community: String, in transaction: PostgresTransaction, pending: PendingChanges
    ) async throws -> [MemoryChange] {
        let shards = self.index.shards
        guard shards.isSharded,
            let before = pending.rules[community] ?? self.index.read(community, { $0.rules }),
            rules.maxRadiusKm > before.maxRadiusKm
        else { return [] }
        let moved = pending.moved(in: community)
        let reached = self.index.read(community) { state in
            state.reached(
                before: IndexRegion(shards: shards, maxRadiusKm: before.maxRadiusKm),
                after: IndexRegion(shards: shards, maxRadiusKm: rules.maxRadiusKm), moved: moved)
        } ?? []
        var facts: [(UserKey, MemberFacts)] = []
        for start in stride(from: 0, to: reached.count, by: 1000) {
            let users = reached[start..<min(reached.count, start + 1000)].map(\.uuidString)
            for snapshot in try await self.store.snapshots(of: users, in: transaction) where snapshot.communityId == community {
                guard let user = UserKey(uuidString: snapshot.userId.lowercased()),
                    case .success(let (_, memberFacts)) = MemberBuilder.member(
                        snapshot, rules: before, user: user, offset: self.configuration.locationOffset),
                    !memberFacts.isEmpty
                else { continue }
                facts.append((user, memberFacts))
            }
        }
        return facts.isEmpty ? [] : [.facts(community, facts)]
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
        case .facts(let community, let facts):
            self.index.write(community) { state in
                for (user, memberFacts) in facts where state.index.isHeld(user) { state.facts[user] = memberFacts }
            }
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
}
