import KindredPostgres

/// The SQL of the users chat knows (table `users`): deactivation, settings, and each one's event-log counter.
struct UserStore: Sendable {
    /// Creates missing rows.
    func ensure(_ users: [String], in runner: some SQLRunner) async throws {
        try await runner.execute(
            "INSERT INTO users (user_id) SELECT unnest(\(users)::uuid[]) ON CONFLICT (user_id) DO NOTHING"
        )
    }

    /// Locks the rows of `users` in id order (every path locks users before threads, in the same order, so two
    /// participants writing to each other at once never deadlock). Appends to their event logs are then ordered.
    func lock(_ users: [String], in transaction: PostgresTransaction) async throws {
        _ = try await transaction.query(
            "SELECT user_id FROM users WHERE user_id = ANY(\(users)::uuid[]) ORDER BY user_id FOR UPDATE"
        )
    }

    func setDeactivated(_ user: String, _ deactivated: Bool, in transaction: PostgresTransaction) async throws {
        try await self.ensure([user], in: transaction)
        try await transaction.execute("UPDATE users SET deactivated = \(deactivated) WHERE user_id = \(user)::uuid")
    }

    func hidesReadReceipts(_ user: String, in runner: some SQLRunner) async throws -> Bool {
        try await runner.query("SELECT hide_read_receipts FROM users WHERE user_id = \(user)::uuid").first?
            .decode(Bool.self, at: 0) ?? false
    }

    func setHideReadReceipts(_ user: String, _ hide: Bool, in transaction: PostgresTransaction) async throws {
        try await self.ensure([user], in: transaction)
        try await transaction.execute("UPDATE users SET hide_read_receipts = \(hide) WHERE user_id = \(user)::uuid")
    }

    /// Whether either user hides read receipts (then neither sees the other's reads).
    func readReceiptsHidden(between users: [String], in runner: some SQLRunner) async throws -> Bool {
        try await runner.query(
            "SELECT coalesce(bool_or(hide_read_receipts), false) FROM users WHERE user_id = ANY(\(users)::uuid[])"
        ).scalar(Bool.self)
    }

    func delete(_ user: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute("DELETE FROM users WHERE user_id = \(user)::uuid")
    }
}
