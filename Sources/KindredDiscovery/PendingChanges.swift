/// A batch's memory changes so far (applied after its commit), and what later events of the batch must see
/// of them: who is indexed in which community, and communities' new rules.
struct PendingChanges: Sendable {
    private(set) var changes: [MemoryChange] = []
    private var communityOf: [UserKey: String?] = [:]
    /// Where the batch places members (published positions).
    private var positionOf: [UserKey: (latitude: Double, longitude: Double)] = [:]
    private(set) var rules: [String: CommunityRules] = [:]

    mutating func record(_ new: [MemoryChange]) {
        self.changes += new
        for change in new {
            switch change {
            case .place(let member, _, let community, _, _):
                self.communityOf[member.user] = .some(community)
                self.positionOf[member.user] = (member.latitude, member.longitude)
            case .remove(let user), .erase(let user): self.communityOf[user] = .some(nil)
            case .rules(let community, let rules): self.rules[community] = rules
            case .swipe, .undo, .block, .unblock, .facts: break
            }
        }
    }

    /// The community `user` will be indexed in once the batch's changes are applied.
    func community(of user: UserKey, in index: DiscoveryIndex) -> String? {
        if let pending = self.communityOf[user] { return pending }
        return index.community(of: user)
    }

    /// Whether placing `member` in `community` must bring their swipes and blocks from the projection: they are
    /// not indexed there once the batch's earlier changes are applied, or they move into a cell this replica owns
    /// from one it does not (a shard keeps only the swipes and blocks of members it owns: `CommunityIndex`).
    func needsRelations(_ member: IndexedMember, community: String, in index: DiscoveryIndex) -> Bool {
        guard self.community(of: member.user, in: index) == community else { return true }
        guard index.owns(latitude: member.latitude, longitude: member.longitude) else { return false }
        guard let previous = self.positionOf[member.user] ?? index.position(of: member.user) else { return true }
        return !index.owns(latitude: previous.latitude, longitude: previous.longitude)
    }

    /// The members the batch places or takes out, as `CommunityState.reached` takes them for `community`: their
    /// pending position there, or nil when they will not be in it.
    func moved(in community: String) -> [UserKey: (latitude: Double, longitude: Double)?] {
        var moved: [UserKey: (latitude: Double, longitude: Double)?] = [:]
        for (user, pending) in self.communityOf {
            moved[user] = pending == community ? self.positionOf[user] : .some(nil)
        }
        return moved
    }
}
