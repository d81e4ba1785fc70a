import KindredPostgres

/// The SQL of the tombstones of deleted accounts (table `deleted_members`: id and time only). Auth's AccountDeleted
/// writes one; an event that arrives later naming the member is dropped (`NotifyService.apply`), so it cannot
/// re-create a row about them; `purge` deletes tombstones older than the inbox's retention.
///
/// An event and a deletion of the same member may be applied at once, in two transactions that do not see each
/// other's rows. A transaction-scoped advisory lock per member orders them: events take it shared, the deletion
/// exclusively, before anything else. An event applied first commits before the deletion erases (so the erasure
/// sees its rows); an event applied second checks the tombstone after the deletion committed. The check is a
/// statement of its own after the lock, so that its snapshot is taken once the lock is held.
struct DeletedMemberStore: Sendable {
    /// Remembers that `user`'s account was deleted (again: the first time stays), holding the member's lock
    /// exclusively until the transaction ends. Call it before erasing the member's rows.
    func record(_ user: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute(
            "SELECT pg_advisory_xact_lock(\(Self.lockClass), hashtext(\(user.lowercased())))"
        )
        try await transaction.execute(
            "INSERT INTO deleted_members (user_id) VALUES (\(user)::uuid) ON CONFLICT (user_id) DO NOTHING"
        )
    }

    /// Holds the locks of `users` shared until the transaction ends, taken in the order given (an event batch's,
    /// sorted: ``EventBatchLocks``), as ``containsAny(of:in:)`` does before it looks.
    func lockShared(_ users: [String], in transaction: PostgresTransaction) async throws {
        try await AdvisoryLocks.take(users, class: Self.lockClass, shared: true, in: transaction)
    }

    /// Those of `users` (valid UUIDs, lowercase) who have a tombstone. Call it once the transaction holds their locks
    /// (``lockShared(_:in:)``), in a statement of its own.
    func deleted(among users: [String], in transaction: PostgresTransaction) async throws -> Set<String> {
        guard !users.isEmpty else { return [] }
        return Set(
            try await transaction.query(
                "SELECT user_id::text FROM deleted_members WHERE user_id = ANY(\(users)::uuid[])"
            ).map { try $0.decode(String.self, at: 0) })
    }

    /// Whether any of `users` (valid UUIDs, lowercase, sorted so that locks are taken in one order) has a
    /// tombstone; holds each member's lock shared until the transaction ends.
    func containsAny(of users: [String], in transaction: PostgresTransaction) async throws -> Bool {
        guard !users.isEmpty else { return false }
        try await self.lockShared(users, in: transaction)
        return !(try await self.deleted(among: users, in: transaction)).isEmpty
    }

    /// Deletes tombstones older than `retention`; returns how many.
    @discardableResult
    func purge(olderThan retention: Duration, in runner: some SQLRunner) async throws -> Int {
        let seconds = Double(retention.components.seconds)
        return try await runner.execute(
            "DELETE FROM deleted_members WHERE deleted_at < now() - make_interval(secs => \(seconds))"
        )
    }

    /// The first key of the two-key advisory locks (the second is the member's hash): notify's member locks, apart
    /// from any other advisory lock of the database (migrations take single-key ones).
    private static let lockClass: Int32 = 0x6e74_6664  // "ntfd"
}
