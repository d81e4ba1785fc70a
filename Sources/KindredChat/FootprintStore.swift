import KindredPostgres

/// The SQL of what chat holds about one user across its tables: the counts `GetUserFootprint` answers, and the rows
/// an account deletion erases that no other store owns (the user's sent messages and read states).
struct FootprintStore: Sendable {
    /// Rows per kind, in the order `GetUserFootprint` lists them (zeros included).
    func counts(of user: String, in runner: some SQLRunner) async throws -> [(kind: String, rows: Int64)] {
        let row = try await runner.query(
            """
            SELECT (SELECT count(*) FROM threads WHERE user_a = \(user)::uuid OR user_b = \(user)::uuid),
                   (SELECT count(*) FROM messages WHERE sender_id = \(user)::uuid),
                   (SELECT count(*) FROM read_states WHERE user_id = \(user)::uuid),
                   (SELECT count(*) FROM stream_events WHERE user_id = \(user)::uuid OR thread_id IN
                       (SELECT thread_id FROM threads WHERE user_a = \(user)::uuid OR user_b = \(user)::uuid)),
                   (SELECT count(*) FROM users WHERE user_id = \(user)::uuid)
            """
        )[0]
        return try ["threads", "messages_sent", "read_states", "stream_events", "settings"].enumerated().map {
            ($0.element, try row.decode(Int64.self, at: $0.offset))
        }
    }

    /// Deletes the messages `user` sent and their read states (the deletion's last step before the user row).
    func eraseMessagesAndReadStates(of user: String, in transaction: PostgresTransaction) async throws {
        try await transaction.execute("DELETE FROM messages WHERE sender_id = \(user)::uuid")
        try await transaction.execute("DELETE FROM read_states WHERE user_id = \(user)::uuid")
    }
}
