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

    /// Claims up to `limit` due notifications for the sender: their next attempt moves `lease` ahead, so another
    /// sender (or this one after a crash) takes them again only once the lease ran out.
    func claimDue(limit: Int, lease: Duration, in runner: some SQLRunner) async throws -> [QueuedNotification] {
        try await runner.query(
            """
            UPDATE notifications n SET next_attempt_at = now() + \(Self.milliseconds(lease)) * interval '1 millisecond'
            FROM (SELECT notification_id FROM notifications WHERE state = 'pending' AND next_attempt_at <= now()
                  ORDER BY next_attempt_at LIMIT \(limit) FOR UPDATE SKIP LOCKED) due
            WHERE n.notification_id = due.notification_id
            RETURNING n.notification_id::text, n.user_id::text, n.kind, n.subject_user_id::text, n.collapse_key,
                      n.connection, n.attempts
            """
        ).compactMap { row in
            let (id, user, kind, subject, collapseKey, connection, attempts) = try row.decode(
                (String, String, String, String?, String?, Bool, Int32).self)
            guard let kind = NotificationKind(rawValue: kind) else { return nil }
            return QueuedNotification(
                id: id, user: user, kind: kind, subject: subject, collapseKey: collapseKey, connection: connection,
                attempts: Int(attempts))
        }
    }

    /// The devices `notification` was delivered to already.
    func deliveredDevices(of notification: String, in runner: some SQLRunner) async throws -> Set<String> {
        Set(
            try await runner.query(
                "SELECT device_id::text FROM notification_deliveries WHERE notification_id = \(notification)::uuid"
            ).map { try $0.decode(String.self, at: 0) })
    }

    /// Records that `device` got `notification`.
    func recordDelivery(of notification: String, to device: String, in runner: some SQLRunner) async throws {
        try await runner.execute(
            """
            INSERT INTO notification_deliveries (notification_id, device_id) VALUES (\(notification)::uuid, \(device)::uuid)
            ON CONFLICT DO NOTHING
            """
        )
    }

    /// Ends a pending notification as `state` (sent, failed, skipped); a cancelled one stays cancelled.
    func finish(_ notification: String, as state: String, in runner: some SQLRunner) async throws {
        try await runner.execute(
            "UPDATE notifications SET state = \(state) WHERE notification_id = \(notification)::uuid AND state = 'pending'")
    }

    /// Tries a pending notification again after `delay`; `attempt` counts it as a failed attempt (not so for quiet
    /// hours).
    func retry(_ notification: String, after delay: Duration, attempt: Bool, in runner: some SQLRunner) async throws {
        try await runner.execute(
            """
            UPDATE notifications SET next_attempt_at = now() + \(Self.milliseconds(delay)) * interval '1 millisecond',
                                     attempts = attempts + \(attempt ? 1 : 0)
            WHERE notification_id = \(notification)::uuid AND state = 'pending'
            """
        )
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}
