/// What an applied change does to memory, decided inside the PostgreSQL transaction and carried out after the
/// commit (under the same `SerialGate`, so memory follows the commit order).
enum MemoryChange: Sendable {
    case place(IndexedMember, MemberFacts, community: String, relations: [SwipeRow], exclusions: [ExclusionRow])
    case remove(UserKey)
    case erase(UserKey)
    case rules(String, CommunityRules)
    /// Filter facts of members a community's wider reach brings into this shard's region (`factsReached`).
    case facts(String, [(UserKey, MemberFacts)])
    case swipe(SwipeRow)
    case undo(SwipeRow)
    case block(UserKey, UserKey)
    case unblock(UserKey, UserKey)
}
