import KindredPostgres

/// The SQL of presence (table `live_streams`): one row per open Subscribe stream, on whichever replica it is.
struct PresenceStore: Sendable {
    func join(stream: String, user: String, in runner: some SQLRunner) async throws {
        try await runner.execute(
            "INSERT INTO live_streams (stream_id, user_id) VALUES (\(stream)::uuid, \(user)::uuid) ON CONFLICT DO NOTHING")
    }

    func leave(stream: String, in runner: some SQLRunner) async throws {
        try await runner.execute("DELETE FROM live_streams WHERE stream_id = \(stream)::uuid")
    }

    /// Marks this server's streams as still open.
    func refresh(_ streams: [String], in runner: some SQLRunner) async throws {
        guard !streams.isEmpty else { return }
        try await runner.execute(
            "UPDATE live_streams SET refreshed_at = now() WHERE stream_id = ANY(\(streams)::uuid[])")
    }

    /// Whether `user` has a stream refreshed within `freshness`.
    func isOnline(_ user: String, freshness: Duration, in runner: some SQLRunner) async throws -> Bool {
        try await runner.query(self.isOnlineQuery(user, freshness: freshness)).scalar(Bool.self)
    }

    /// The statement of ``isOnline(_:freshness:in:)`` (one row, one boolean).
    func isOnlineQuery(_ user: String, freshness: Duration) -> PostgresQuery {
        """
        SELECT EXISTS (SELECT 1 FROM live_streams WHERE user_id = \(user)::uuid
                         AND refreshed_at > now() - \(Self.milliseconds(freshness)) * interval '1 millisecond')
        """
    }

    /// Deletes rows of streams whose server stopped refreshing them (it died) and of a deleted account.
    func purge(staleAfter: Duration, in runner: some SQLRunner) async throws {
        try await runner.execute(
            "DELETE FROM live_streams WHERE refreshed_at < now() - \(Self.milliseconds(staleAfter)) * interval '1 millisecond'")
    }

    func erase(_ user: String, in runner: some SQLRunner) async throws {
        try await runner.execute("DELETE FROM live_streams WHERE user_id = \(user)::uuid")
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}
