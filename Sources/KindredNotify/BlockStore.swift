import KindredPostgres

/// The SQL of the blocks notify applied (table `blocks`): match's UserBlocked and UserUnblocked, per (blocker,
/// blocked), with the sequence of the event in the blocker's partition. A like, a match, a message or an activity
/// about a pair blocked either way queues or counts nothing, whichever order the events arrive in.
///
/// A block and an event about the same pair may be applied at once, in two transactions that do not see each
/// other's rows. A transaction-scoped advisory lock per pair orders them: both take it before anything else about
/// the pair, so either the event commits first (and the block's cancellation sees what it queued), or the event's
/// check, a statement of its own after the lock, sees the block.
struct BlockStore: Sendable {
    /// Holds the pair's lock (either order of the two ids is the same pair) until the transaction ends.
    func lock(between first: String, and second: String, in transaction: PostgresTransaction) async throws {
        let pair = Self.pair(first, second)
        try await transaction.execute("SELECT pg_advisory_xact_lock(\(Self.lockClass), hashtext(\(pair)))")
    }

    /// Holds the locks of `pairs` (each "first|second", ids sorted, as ``lock(between:and:)`` names them) until the
    /// transaction ends, taken in the order given (an event batch's, sorted: ``EventBatchLocks``).
    func lock(pairs: [String], in transaction: PostgresTransaction) async throws {
        try await AdvisoryLocks.take(pairs, class: Self.lockClass, in: transaction)
    }

    /// The name of the pair lock of two members (either order).
    static func pair(_ first: String, _ second: String) -> String { [first, second].sorted().joined(separator: "|") }

    /// The first key of the pair locks (the second is the pair's hash), apart from notify's member and digest locks.
    private static let lockClass: Int32 = 0x6e74_626b  // "ntbk"

    /// Records that `blocker`'s block on `blocked` stands (`active`) or was lifted, as the event of `sequence` said;
    /// an event with a lower sequence than the recorded one changes nothing (equal: the later applied wins). Returns
    /// whether the row changed: false for such an older event.
    @discardableResult
    func record(
        blocker: String, blocked: String, active: Bool, sequence: Int64, in runner: some SQLRunner
    ) async throws -> Bool {
        try await runner.execute(
            """
            INSERT INTO blocks (blocker_id, blocked_id, active, sequence)
            VALUES (\(blocker)::uuid, \(blocked)::uuid, \(active), \(sequence))
            ON CONFLICT (blocker_id, blocked_id) DO UPDATE
                SET active = EXCLUDED.active, sequence = EXCLUDED.sequence, changed_at = now()
                WHERE blocks.sequence <= EXCLUDED.sequence
            """
        ) == 1
    }

    /// Whether either member blocks the other. (`NotificationStore.queueMessage` makes the same test inside its own
    /// statement: a change to what counts as a block changes both.)
    func isBlocked(between first: String, and second: String, in runner: some SQLRunner) async throws -> Bool {
        try await runner.query(
            """
            SELECT EXISTS (SELECT 1 FROM blocks
                           WHERE active AND ((blocker_id = \(first)::uuid AND blocked_id = \(second)::uuid)
                                          OR (blocker_id = \(second)::uuid AND blocked_id = \(first)::uuid)))
            """
        ).scalar(Bool.self)
    }

    /// Deletes the rows of blocks lifted longer than `retention` ago; returns how many.
    @discardableResult
    func purge(liftedBefore retention: Duration, in runner: some SQLRunner) async throws -> Int {
        let seconds = Double(retention.components.seconds)
        return try await runner.execute(
            "DELETE FROM blocks WHERE NOT active AND changed_at < now() - make_interval(secs => \(seconds))"
        )
    }

    /// Account deletion: the blocks the member made and the ones made on them.
    func erase(_ user: String, in runner: some SQLRunner) async throws {
        try await runner.execute("DELETE FROM blocks WHERE blocker_id = \(user)::uuid OR blocked_id = \(user)::uuid")
    }

    func count(involving user: String, in runner: some SQLRunner) async throws -> Int64 {
        try await runner.query(
            "SELECT count(*) FROM blocks WHERE blocker_id = \(user)::uuid OR blocked_id = \(user)::uuid"
        ).scalar(Int64.self)
    }
}
