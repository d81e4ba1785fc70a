import KindredPostgres

/// The SQL of the users chat knows (table `users`): deactivation, settings, each one's event-log counter, and the
/// messages each sent per clock hour.
struct UserStore: Sendable {
    /// An expression over a `users` row (read at the sending transaction's `now()`): the messages its user sent in
    /// the last 60 minutes, estimated from the counts per clock hour as this hour's count plus the previous hour's
    /// times the part of that hour still within the 60 minutes (the sends of an hour taken as spread evenly over it).
    /// It never counts a message twice; a burst at the end of the previous hour weighs less than it would in an exact
    /// count, one at its start more.
    static let sentLastHour = """
        CASE WHEN sent_hour = date_trunc('hour', now())
                 THEN sent_in_hour + floor(sent_in_previous_hour
                      * (1 - extract(epoch FROM now() - date_trunc('hour', now())) / 3600))::int
             WHEN sent_hour = date_trunc('hour', now()) - interval '1 hour'
                 THEN floor(sent_in_hour * (1 - extract(epoch FROM now() - date_trunc('hour', now())) / 3600))::int
             ELSE 0 END
        """

    /// The statement that counts a message `user` sends in the current clock hour (under the sender's row lock, in
    /// the sending transaction).
    static func countSentQuery(by user: String) -> PostgresQuery {
        """
        UPDATE users SET
            sent_in_previous_hour = CASE WHEN sent_hour = date_trunc('hour', now()) THEN sent_in_previous_hour
                                         WHEN sent_hour = date_trunc('hour', now()) - interval '1 hour' THEN sent_in_hour
                                         ELSE 0 END,
            sent_in_hour = CASE WHEN sent_hour = date_trunc('hour', now()) THEN sent_in_hour + 1 ELSE 1 END,
            sent_hour = date_trunc('hour', now())
        WHERE user_id = \(user)::uuid
        """
    }

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
