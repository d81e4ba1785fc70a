import KindredPostgres

/// The SQL of the notification queue (table `notifications`): ids only, one row per member, kind and source.
struct NotificationStore: Sendable {
    /// Queues a notification unless the same (member, kind, source) is queued already; true when it was new.
    @discardableResult
    func enqueue(
        id: String, to user: String, kind: NotificationKind, about subject: String?, source: String,
        collapseKey: String?, connection: Bool = false, in runner: some SQLRunner
    ) async throws -> Bool {
        try await runner.execute(
            """
            INSERT INTO notifications (notification_id, user_id, kind, subject_user_id, source_id, collapse_key, connection)
            VALUES (\(id)::uuid, \(user)::uuid, \(kind.rawValue), \(subject)::uuid, \(source), \(collapseKey), \(connection))
            ON CONFLICT (user_id, kind, source_id) DO NOTHING
            """
        ) > 0
    }

    /// Cancels what is still pending between two members, either way (a block, an unmatch); returns how many.
    @discardableResult
    func cancelPending(between first: String, and second: String, in runner: some SQLRunner) async throws -> Int {
        try await runner.execute(
            """
            UPDATE notifications SET state = 'cancelled'
            WHERE state = 'pending' AND ((user_id = \(first)::uuid AND subject_user_id = \(second)::uuid)
                                      OR (user_id = \(second)::uuid AND subject_user_id = \(first)::uuid))
            """
        )
    }

    /// Cancels everything pending to or about `user` (a deactivation).
    func cancelPending(involving user: String, in runner: some SQLRunner) async throws {
        try await runner.execute(
            """
            UPDATE notifications SET state = 'cancelled'
            WHERE state = 'pending' AND (user_id = \(user)::uuid OR subject_user_id = \(user)::uuid)
            """
        )
    }

    /// Rows per state of what `user` is to receive (tests, the CLI's view of the queue).
    func states(of user: String, kind: NotificationKind, in runner: some SQLRunner) async throws -> [String: Int64] {
        var states: [String: Int64] = [:]
        for row in try await runner.query(
            "SELECT state, count(*) FROM notifications WHERE user_id = \(user)::uuid AND kind = \(kind.rawValue) GROUP BY state"
        ) {
            let (state, count) = try row.decode((String, Int64).self)
            states[state] = count
        }
        return states
    }

    /// Deletes every notification to or about `user` (account deletion).
    func erase(_ user: String, in runner: some SQLRunner) async throws {
        try await runner.execute(
            "DELETE FROM notifications WHERE user_id = \(user)::uuid OR subject_user_id = \(user)::uuid")
    }

    func count(involving user: String, in runner: some SQLRunner) async throws -> Int64 {
        try await runner.query(
            "SELECT count(*) FROM notifications WHERE user_id = \(user)::uuid OR subject_user_id = \(user)::uuid"
        ).scalar(Int64.self)
    }
}
