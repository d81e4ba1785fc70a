import Foundation
import KindredGeo
import KindredProto

#if canImport(Glibc)
import Glibc
#endif

/// One community's in-memory state: the candidate index, the recommender (one 32-byte `MemberState` per
/// slot, in the index's slot order: no map from users to model handles), filter facts and the community's rules.
/// A member who leaves the index keeps their model state aside (`departed`, only those members) and gets it
/// back when they return; a deleted member's is erased.
public struct CommunityState: Sendable {
    public var index = CommunityIndex()
    public var recommender = Recommender()
    public var rules = CommunityRules()
    /// Filter facts of the members the index's region holds (the candidates a deck or search here can meet, and
    /// every viewer served here); with shards, members beyond the region need none here.
    var facts: [UserKey: MemberFacts] = [:]
    /// Model state of members not in the index (deactivated, ineligible) who have swiped or been swiped.
    var departed: [UserKey: MemberState] = [:]
    /// Members indexed when the taste directions were last estimated.
    var tasteBasisIndexed = 0

    public init(rules: CommunityRules = CommunityRules()) {
        self.rules = rules
    }

    /// Fits the index's region to this replica's shards and the community's widest radius (after a rebuild and
    /// whenever the rules change).
    mutating func applyShards(_ shards: DiscoveryShards) {
        let region = IndexRegion(shards: shards, maxRadiusKm: self.rules.maxRadiusKm)
        guard region != self.index.region else { return }
        self.index.setRegion(region)
        // Members the region no longer holds need no facts; those it holds anew get theirs from the projection
        // (`DiscoveryService.factsReached`, when the rules widen the reach).
        self.facts = self.facts.filter { self.index.isHeld($0.key) }
    }

    /// Members who are indexed here and not held by this community's region under `before` but held under
    /// `after` (a wider reach): the members whose facts must come from the projection. `moved` overrides the
    /// index's positions (a batch's placements not applied yet: nil for a member leaving the community).
    func reached(
        before: IndexRegion, after: IndexRegion, moved: [UserKey: (latitude: Double, longitude: Double)?]
    ) -> [UserKey] {
        var reached: [UserKey] = []
        func check(_ user: UserKey, _ latitude: Double, _ longitude: Double) {
            if after.holds(latitude: latitude, longitude: longitude), !before.holds(latitude: latitude, longitude: longitude) {
                reached.append(user)
            }
        }
        self.index.forEachMember { user, latitude, longitude in
            if moved[user] == nil { check(user, latitude, longitude) }
        }
        for case let (user, position?) in moved { check(user, position.latitude, position.longitude) }
        return reached.sorted { $0 < $1 }
    }

    /// The farthest a viewer whose own radius is `own` km is shown members: the deck widens up to the
    /// community's maximum when their own radius runs dry, and search reaches it too.
    func widestRadius(own: Int) -> Int { max(own, self.rules.maxRadiusKm) }

    /// Inserts or replaces a member; returns whether they were new to the index.
    @discardableResult
    mutating func upsert(_ member: IndexedMember, facts: MemberFacts) -> Bool {
        let isNew = self.index.slot(of: member.user) == nil
        let slot = Int(self.index.upsert(member))
        if isNew {
            // A slot freed by someone who left starts empty; a returning member brings their state back.
            self.recommender.setState(self.departed.removeValue(forKey: member.user) ?? MemberState(), of: slot)
            // The taste directions follow the community's interests: re-estimated whenever it doubles.
            if self.index.count >= max(Self.tasteBasisMinimumMembers, 2 * self.tasteBasisIndexed) {
                self.refreshTasteBasis()
            }
        }
        // Only members with filterable values or text words (5M empty entries were ~300 MB), and only those the
        // region holds.
        self.facts[member.user] = facts.isEmpty || !self.index.isHeld(member.user) ? nil : facts
        return isNew
    }

    /// Members with interests needed before the taste directions are first estimated.
    static let tasteBasisMinimumMembers = 200

    /// Re-estimates the taste directions from the indexed members' interests (a rebuild does it once, after
    /// loading the members and before replaying the swipes).
    mutating func refreshTasteBasis() {
        guard self.index.count >= Self.tasteBasisMinimumMembers else { return }
        self.tasteBasisIndexed = self.index.count
        let old = self.recommender.basis
        self.recommender.refreshTasteBasis(from: self.index.interests)
        let transfer = self.recommender.basis.transfer(from: old)
        for (user, state) in self.departed where state.taste != .zero { self.departed[user]!.taste = transfer(state.taste) }
    }

    mutating func remove(_ user: UserKey) -> Bool {
        self.facts[user] = nil
        if let slot = self.index.slot(of: user).map(Int.init) {
            let state = self.recommender.state(of: slot)
            if !state.isEmpty { self.departed[user] = state }
            self.recommender.erase(slot)
        }
        return self.index.remove(user)
    }

    /// Forgets a deleted member entirely, model included.
    mutating func erase(_ user: UserKey) {
        _ = self.remove(user)
        self.departed[user] = nil
    }

    /// The ranking features of `viewer` looking at `target` now (both indexed), for learning from a swipe.
    func features(viewer: UserKey, target: UserKey, nowUnixMs: Int64) -> (RankingFeatures, InterestSet)? {
        guard let v = self.index.slot(of: viewer).map(Int.init), let t = self.index.slot(of: target).map(Int.init),
            let km = self.index.coarseKilometres(viewer, target)
        else { return nil }
        let profile = { (slot: Int) in
            RankingProfile(
                interests: self.index.interests[slot], attributes: self.index.attributes[slot],
                ageYears: Int(self.index.birthYear(slot)), lastActiveUnixMs: Int64(self.index.lastActive[slot]) * 60_000)
        }
        let features = self.recommender.features(
            viewer: v, profile(v), candidate: t, profile(t), distanceKm: km, nowUnixMs: nowUnixMs)
        return (features, self.index.interests[t])
    }

    /// Learns from a swipe whose features were stored with it (events and rebuild replay alike): the viewer's
    /// and the target's state change at once, wherever they are (indexed or departed).
    mutating func learn(viewer: UserKey, target: UserKey, features: RankingFeatures, interests: InterestSet, liked: Bool) {
        self.withStates(viewer, target) { recommender, v, t in
            recommender.record(viewer: &v, candidate: &t, candidateInterests: interests, features: features, liked: liked)
        }
    }

    mutating func unlearn(viewer: UserKey, target: UserKey, features: RankingFeatures, interests: InterestSet, liked: Bool) {
        self.withStates(viewer, target) { recommender, v, t in
            recommender.forget(viewer: &v, candidate: &t, candidateInterests: interests, liked: liked)
        }
    }

    /// Runs `body` on the two members' states (by slot, or aside for members not indexed) and stores them back.
    private mutating func withStates(
        _ viewer: UserKey, _ target: UserKey, _ body: (inout Recommender, inout MemberState, inout MemberState) -> Void
    ) {
        guard viewer != target else { return }
        let (vs, ts) = (self.index.slot(of: viewer).map(Int.init), self.index.slot(of: target).map(Int.init))
        var v = vs.map { self.recommender.state(of: $0) } ?? self.departed[viewer] ?? MemberState()
        var t = ts.map { self.recommender.state(of: $0) } ?? self.departed[target] ?? MemberState()
        body(&self.recommender, &v, &t)
        if let vs { self.recommender.setState(v, of: vs) } else { self.departed[viewer] = v.isEmpty ? nil : v }
        if let ts { self.recommender.setState(t, of: ts) } else { self.departed[target] = t.isEmpty ? nil : t }
    }

    /// A member's model state (tests compare rebuilt and incremental models).
    func modelState(_ user: UserKey) -> MemberState? {
        self.index.slot(of: user).map { self.recommender.state(of: Int($0)) } ?? self.departed[user]
    }
}

extension CommunityState {
    /// A member's model state and the population slopes (tests compare rebuilt and incremental models).
    public func modelForTests(_ user: UserKey) -> (MemberState?, SIMD8<Double>) { (self.modelState(user), self.recommender.weights) }
}

extension CommunityState {
    /// Renumbers the index's slots by place (`CommunityIndex.arrangeByPlace`, a rebuild once its members are in)
    /// and moves the per-slot model states with them.
    mutating func arrangeByPlace() {
        self.recommender.renumber(self.index.arrangeByPlace())
    }
}
