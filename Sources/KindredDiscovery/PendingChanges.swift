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
