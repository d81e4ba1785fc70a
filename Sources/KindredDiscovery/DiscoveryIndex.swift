import Foundation
import KindredGeo
import KindredProto

#if canImport(Glibc)
import Glibc
#endif

/// All communities' in-memory state behind one readers-writer lock (DESIGN §4: the hot index lives in memory,
/// PostgreSQL stays the source of truth). Decks read; events, rebuilds and index calls write, one at a time.
public final class DiscoveryIndex: @unchecked Sendable {
    private let lock = ReadersWriterLock()
    /// Which community a user is in is the community whose index holds them (communities are few; a map of every
    /// user to their community was ~200 MB at 5M members).
    private var communities: [String: CommunityState] = [:]

    /// This replica's shards: which viewers it serves and which members its decks may meet.
    public let shards: DiscoveryShards

    public init(shards: DiscoveryShards = .single) {
        self.shards = shards
    }

    /// A community's state as this replica first holds it (its shards applied: a rebuild's states, too, keep only
    /// the swipes and blocks this replica needs from the start).
    func fresh(_ rules: CommunityRules = CommunityRules()) -> CommunityState {
        var state = CommunityState(rules: rules)
        state.applyShards(self.shards)
        return state
    }

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
            if self.communities[community] == nil { self.communities[community] = self.fresh() }
            defer { self.communities[community]!.applyShards(self.shards) }
            return try body(&self.communities[community]!)
        }
    }

    /// Whether this replica serves the viewers at a published position (with one shard, everywhere).
    public func owns(latitude: Double, longitude: Double) -> Bool {
        !self.shards.isSharded || self.shards.owner(latitude: latitude, longitude: longitude) == self.shards.index
    }

    /// The community an indexed user is in.
    public func community(of user: UserKey) -> String? {
        self.lock.read { self.owner(of: user) }
    }

    /// An indexed user's published position, in whichever community holds them.
    public func position(of user: UserKey) -> (latitude: Double, longitude: Double)? {
        self.lock.read {
            for state in self.communities.values { if let position = state.index.position(of: user) { return position } }
            return nil
        }
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
            if self.communities[community] == nil { self.communities[community] = self.fresh() }
            return self.communities[community]!.upsert(member, facts: facts)
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
                self.communities[community] = communities[community] ?? self.fresh(self.communities[community]?.rules ?? CommunityRules())
                self.communities[community]!.applyShards(self.shards)
            } else {
                self.communities = communities
                for key in self.communities.keys { self.communities[key]!.applyShards(self.shards) }
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
