import KindredPostgres
import KindredServiceKit

/// A thread as stored, with the participants' state needed to decide what a caller may do.
struct ThreadRecord: Sendable, Hashable {
    enum State: String, Sendable { case open, closed }
    var threadID: String
    var userA: String
    var userB: String
    var communityID: String
    var state: State
    var lastSequence: Int64
    /// Either participant's account is deactivated: the thread is hidden from both.
    var hidden: Bool

    func isParticipant(_ user: String) -> Bool { user == self.userA || user == self.userB }
    func other(than user: String) -> String { user == self.userA ? self.userB : self.userA }

    /// How a participant stands to the other, as far as the thread tells: open is a match (or connection, which
    /// the policy treats alike), closed is an ended match whatever ended it (an unmatch, a block either way, a
    /// deletion: they must read alike), hidden is a deactivation.
    var relation: MemberRelation {
        if self.hidden { return .deactivated }
        return self.state == .open ? .matched : .unmatched
    }

    static let columns = """
        t.thread_id::text, t.user_a::text, t.user_b::text, t.community_id, t.state, t.last_sequence,
        (ua.deactivated OR ub.deactivated) AS hidden
        """
    /// How many columns `columns` has (a query's own columns follow them).
    static let columnCount = 7
    static let from = """
        threads t JOIN users ua ON ua.user_id = t.user_a JOIN users ub ON ub.user_id = t.user_b
        """

    init(row: PostgresRow) throws {
        self.threadID = try row.decode(String.self, at: 0)
        self.userA = try row.decode(String.self, at: 1)
        self.userB = try row.decode(String.self, at: 2)
        self.communityID = try row.decode(String.self, at: 3)
        self.state = State(rawValue: try row.decode(String.self, at: 4)) ?? .closed
        self.lastSequence = try row.decode(Int64.self, at: 5)
        self.hidden = try row.decode(Bool.self, at: 6)
    }
}
