import Foundation
import KindredProto

#if canImport(Glibc)
import Glibc
#endif

/// A readers-writer lock (pthread): many readers at once, one writer. Decks are synchronous CPU work, so
/// readers hold it without suspending, and both cores serve decks at the same time (an actor would serialise
/// them on one).
final class ReadersWriterLock: @unchecked Sendable {
    private let lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)

    init() {
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        // Writers first: a steady stream of decks must not starve event application.
        pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        pthread_rwlock_init(self.lock, &attributes)
        pthread_rwlockattr_destroy(&attributes)
    }

    deinit {
        pthread_rwlock_destroy(self.lock)
        self.lock.deallocate()
    }

    func read<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_rdlock(self.lock)
        defer { pthread_rwlock_unlock(self.lock) }
        return try body()
    }

    func write<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_wrlock(self.lock)
        defer { pthread_rwlock_unlock(self.lock) }
        return try body()
    }
}

/// One community's in-memory state: the candidate index, the recommender (models keyed by a stable handle
/// per user, so a member who leaves the index and comes back keeps their model), the per-slot model summary
/// the ranking reads, filter facts and the community's rules.
public struct CommunityState: Sendable {
    public var index = CommunityIndex()
    public var recommender = Recommender()
    public var rules = CommunityRules()
    var handles: [UserKey: Int] = [:]
    var nextHandle = 0
    var models: [MemberModel] = []
    var facts: [UserKey: MemberFacts] = [:]

    public init(rules: CommunityRules = CommunityRules()) {
        self.rules = rules
    }

    mutating func handle(_ user: UserKey) -> Int {
        if let handle = self.handles[user] { return handle }
        let handle = self.nextHandle
        self.nextHandle += 1
        self.handles[user] = handle
        return handle
    }

    /// Inserts or replaces a member; returns whether they were new to the index.
    @discardableResult
    mutating func upsert(_ member: IndexedMember, facts: MemberFacts) -> Bool {
        let isNew = self.index.slot(of: member.user) == nil
        let slot = Int(self.index.upsert(member))
        if self.models.count <= slot { self.models.append(contentsOf: repeatElement(.prior, count: slot + 1 - self.models.count)) }
        // Only members with filterable values or text words: most have none (5M empty entries were ~300 MB).
        self.facts[member.user] = facts.isEmpty ? nil : facts
        self.refreshModel(member.user)
        return isNew
    }

    mutating func remove(_ user: UserKey) -> Bool {
        self.facts[user] = nil
        return self.index.remove(user)
    }

    /// Forgets a deleted member entirely, model included.
    mutating func erase(_ user: UserKey) {
        _ = self.remove(user)
        if let handle = self.handles.removeValue(forKey: user) { self.recommender.erase(handle) }
    }

    /// The ranking features of `viewer` looking at `target` now (both indexed), for learning from a swipe.
    func features(viewer: UserKey, target: UserKey, nowUnixMs: Int64) -> (RankingFeatures, InterestSet)? {
        guard let v = self.index.slot(of: viewer).map(Int.init), let t = self.index.slot(of: target).map(Int.init),
            let km = self.index.coarseKilometres(viewer, target), let vh = self.handles[viewer],
            let th = self.handles[target]
        else { return nil }
        let profile = { (slot: Int) in
            RankingProfile(
                interests: self.index.interests[slot], attributes: self.index.attributes[slot],
                ageYears: Int(self.index.birthYear(slot)), lastActiveUnixMs: Int64(self.index.lastActive[slot]) * 60_000)
        }
        let features = self.recommender.features(
            viewer: vh, profile(v), candidate: th, profile(t), distanceKm: km, nowUnixMs: nowUnixMs)
        return (features, self.index.interests[t])
    }

    /// Learns from a swipe whose features were stored with it (events and rebuild replay alike).
    mutating func learn(viewer: UserKey, target: UserKey, features: RankingFeatures, interests: InterestSet, liked: Bool) {
        let (vh, th) = (self.handle(viewer), self.handle(target))
        self.recommender.recordSwipe(
            viewer: vh, candidate: th, candidateInterests: interests, features: features, liked: liked)
        // Only the two members concerned: members without a model use the population weights at ranking time,
        // and a swiper's weights catch up with a refreshed population prior at their next swipe (or a rebuild).
        self.refreshModel(viewer)
        self.refreshModel(target)
    }

    /// Learns from a swipe without solving anyone's weights (a rebuild solves every model once at the end).
    mutating func learnWithoutSolving(
        viewer: UserKey, target: UserKey, features: RankingFeatures, interests: InterestSet, liked: Bool
    ) {
        let (vh, th) = (self.handle(viewer), self.handle(target))
        self.recommender.recordSwipe(
            viewer: vh, candidate: th, candidateInterests: interests, features: features, liked: liked)
    }

    mutating func unlearn(viewer: UserKey, target: UserKey, features: RankingFeatures, interests: InterestSet, liked: Bool) {
        let (vh, th) = (self.handle(viewer), self.handle(target))
        self.recommender.forgetSwipe(viewer: vh, candidate: th, candidateInterests: interests, features: features, liked: liked)
        self.refreshModel(viewer)
        self.refreshModel(target)
    }

    /// The ranking's per-slot summary of a member's model: solved weights and appeal.
    mutating func refreshModel(_ user: UserKey) {
        guard let slot = self.index.slot(of: user).map(Int.init) else { return }
        let handle = self.handle(user)
        self.models[slot] = MemberModel(
            weights: SIMD8<Float>(self.recommender.weights(of: handle)), appeal: Float(self.recommender.appealOf(handle)),
            ownWeights: self.recommender.hasModel(handle))
    }

    /// Every indexed member's summary (after a rebuild).
    mutating func refreshAllModels() {
        for (user, handle) in self.handles {
            guard let slot = self.index.slot(of: user).map(Int.init) else { continue }
            // As `refreshModel`, without caching each solution in the recommender (a copy per member).
            self.models[slot] = MemberModel(
                weights: SIMD8<Float>(self.recommender.currentWeights(of: handle)),
                appeal: Float(self.recommender.appealOf(handle)), ownWeights: self.recommender.hasModel(handle))
        }
    }

    /// The population prior as the ranking uses it for members without a model of their own.
    var populationWeights: SIMD8<Float> { SIMD8<Float>(self.recommender.currentWeights(of: -1)) }

    /// What the viewer has shown they like (the taste feature of their deck; nil before their first swipe).
    func viewerTaste(_ viewer: UserKey) -> TasteProfile? {
        self.handles[viewer].flatMap { self.recommender.taste(of: $0) }
    }

    /// The solved weights of the viewer's like model (the population prior before their first swipe).
    func viewerWeights(_ viewer: UserKey) -> SIMD8<Double> {
        self.handles[viewer].map { self.recommender.currentWeights(of: $0) } ?? self.recommender.currentWeights(of: -1)
    }
}

/// All communities' in-memory state behind one readers-writer lock (DESIGN §4: the hot index lives in memory,
/// PostgreSQL stays the source of truth). Decks read; events, rebuilds and index calls write, one at a time.
public final class DiscoveryIndex: @unchecked Sendable {
    private let lock = ReadersWriterLock()
    /// Which community a user is in is the community whose index holds them (communities are few; a map of every
    /// user to their community was ~200 MB at 5M members).
    private var communities: [String: CommunityState] = [:]

    public init() {}

    /// Reads one community's state (nil: no such community in memory).
    public func read<T>(_ community: String, _ body: (CommunityState) throws -> T) rethrows -> T? {
        try self.lock.read {
            guard let state = self.communities[community] else { return nil }
            return try body(state)
        }
    }

    /// Changes one community's state (created on first use).
    @discardableResult
    public func write<T>(_ community: String, _ body: (inout CommunityState) throws -> T) rethrows -> T {
        try self.lock.write {
            try body(&self.communities[community, default: CommunityState()])
        }
    }

    /// The community an indexed user is in.
    public func community(of user: UserKey) -> String? {
        self.lock.read { self.owner(of: user) }
    }

    /// Under the lock.
    private func owner(of user: UserKey) -> String? {
        self.communities.first { $0.value.index.slot(of: user) != nil }?.key
    }

    /// Indexes a member in `community`, removing them from another community they were in.
    @discardableResult
    func place(_ member: IndexedMember, facts: MemberFacts, community: String) -> Bool {
        self.lock.write {
            if let previous = self.owner(of: member.user), previous != community {
                _ = self.communities[previous]?.remove(member.user)
            }
            return self.communities[community, default: CommunityState()].upsert(member, facts: facts)
        }
    }

    /// Removes a member from the index (their model stays, for when they come back).
    @discardableResult
    func remove(_ user: UserKey) -> Bool {
        self.lock.write {
            guard let community = self.owner(of: user) else { return false }
            return self.communities[community]?.remove(user) ?? false
        }
    }

    /// Forgets a deleted member in every community.
    func erase(_ user: UserKey) {
        self.lock.write {
            for key in self.communities.keys { self.communities[key]?.erase(user) }
        }
    }

    /// Replaces everything (a rebuild), or one community's state.
    func replace(with communities: [String: CommunityState], only community: String?) {
        self.lock.write {
            if let community {
                self.communities[community] = communities[community] ?? CommunityState(rules: self.communities[community]?.rules ?? CommunityRules())
            } else {
                self.communities = communities
            }
        }
    }

    /// Members indexed, in all communities or one.
    public func count(community: String? = nil) -> Int {
        self.lock.read {
            if let community { return self.communities[community]?.index.count ?? 0 }
            return self.communities.values.reduce(0) { $0 + $1.index.count }
        }
    }
}

extension CommunityState {
    /// A viewer's solved weights (tests compare rebuilt and incremental models).
    public func viewerWeightsForTests(_ viewer: UserKey) -> SIMD8<Double> { self.viewerWeights(viewer) }
}

extension CommunityState {
    /// Renumbers the index's slots by place (`CommunityIndex.arrangeByPlace`, a rebuild once its members are in)
    /// and moves the per-slot model summaries with them.
    mutating func arrangeByPlace() {
        let newSlot = self.index.arrangeByPlace()
        var models = [MemberModel](repeating: .prior, count: self.index.slotCapacity)
        for (old, new) in newSlot.enumerated() where new >= 0 && old < self.models.count {
            models[Int(new)] = self.models[old]
        }
        self.models = models
    }
}
