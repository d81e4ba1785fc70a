/// An active match or connection of the pair.
public struct MatchRecord: Sendable, Hashable {
    public var id: String
    public var mode: MatchMode
    /// Who liked first (one-way: the follower).
    public var initiator: String
    public var createdUnixMs: Int64
    /// One-way: when the other followed back; nil if not (always nil in mutual mode).
    public var reciprocatedUnixMs: Int64?
}
