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

    /// The newest pending notification of `kind` and `collapseKey` (a thread's messages, a member's likes) to
    /// `user`, locked until the transaction ends, for ``MessageCollapse`` or ``LikesDigest`` to decide on.
    func waiting(_ kind: NotificationKind, to user: String, collapseKey: String, in transaction: PostgresTransaction)
        async throws -> WaitingNotification?
    {
        try await transaction.query(
            """
            SELECT notification_id::text, claimed_at IS NOT NULL, attempts FROM notifications
            WHERE user_id = \(user)::uuid AND collapse_key = \(collapseKey) AND state = 'pending'
              AND kind = \(kind.rawValue)
            ORDER BY created_at DESC LIMIT 1 FOR UPDATE
            """
        ).first.map { row in
            let (id, claimed, attempts) = try row.decode((String, Bool, Int32).self)
            return WaitingNotification(id: id, claimed: claimed, attempts: Int(attempts))
        }
    }

    /// Queues a message notification due after `delay`, unless the message has one already.
    func enqueueMessage(
        id: String, to user: String, from sender: String, thread: String, message: String, collapseKey: String,
        delay: Duration, in runner: some SQLRunner
    ) async throws {
        try await runner.execute(
            """
            INSERT INTO notifications (notification_id, user_id, kind, subject_user_id, source_id, collapse_key,
                                       thread_id, latest_message_id, next_attempt_at)
            VALUES (\(id)::uuid, \(user)::uuid, \(NotificationKind.newMessage.rawValue), \(sender)::uuid, \(message),
                    \(collapseKey), \(thread)::uuid, \(message)::uuid,
                    now() + \(Self.milliseconds(delay)) * interval '1 millisecond')
            ON CONFLICT (user_id, kind, source_id) DO NOTHING
            """
        )
    }

    /// Folds one more message into the waiting notification `id` (it stays due when it was).
    func merge(message: String, into id: String, in runner: some SQLRunner) async throws {
        try await runner.execute(
            """
            UPDATE notifications SET latest_message_id = \(message)::uuid, item_count = item_count + 1
            WHERE notification_id = \(id)::uuid AND state = 'pending'
            """
        )
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
            UPDATE notifications n SET next_attempt_at = now() + \(Self.milliseconds(lease)) * interval '1 millisecond',
                                       claimed_at = now()
            FROM (SELECT notification_id FROM notifications WHERE state = 'pending' AND next_attempt_at <= now()
                  ORDER BY next_attempt_at LIMIT \(limit) FOR UPDATE SKIP LOCKED) due
            WHERE n.notification_id = due.notification_id
            RETURNING n.notification_id::text, n.user_id::text, n.kind, n.subject_user_id::text, n.collapse_key,
                      n.connection, n.attempts, n.thread_id::text, n.latest_message_id::text, n.item_count, n.activity,
                      n.expires_at
            """
        ).compactMap { row in
            let (id, user, kind, subject, collapseKey, connection, attempts) = try row.decode(
                (String, String, String, String?, String?, Bool, Int32).self)
            let (thread, message, count) = (
                try row.decode(String?.self, at: 7), try row.decode(String?.self, at: 8), try row.decode(Int32.self, at: 9)
            )
            guard let kind = NotificationKind(rawValue: kind) else { return nil }
            return QueuedNotification(
                id: id, user: user, kind: kind, subject: subject, collapseKey: collapseKey, connection: connection,
                attempts: Int(attempts), thread: thread, latestMessage: message, itemCount: Int(count),
                activity: try row.decode(String?.self, at: 10),
                expiresUnixMs: try row.decode(PostgresTimestamp?.self, at: 11)?.millisecondsSinceEpoch)
        }
    }

    /// The devices each of `notifications` was delivered to already (by notification; absent: none).
    func deliveredDevices(of notifications: [String], in runner: some SQLRunner) async throws -> [String: Set<String>] {
        var delivered: [String: Set<String>] = [:]
        for row in try await runner.query(
            """
            SELECT notification_id::text, device_id::text FROM notification_deliveries
            WHERE notification_id = ANY(\(notifications)::uuid[])
            """
        ) {
            let (notification, device) = try row.decode((String, String).self)
            delivered[notification, default: []].insert(device)
        }
        return delivered
    }

    /// Ends a pending notification as `state` (sent, failed, skipped, suppressed, cancelled); a cancelled one stays
    /// cancelled. `delivered`: the devices that got it on this attempt, recorded in the same statement (a retry skips
    /// them). The likes a digest stood for go with it (told, or not to be told).
    func finish(
        _ notification: String, as state: String, delivered: [String] = [], in runner: some SQLRunner
    ) async throws {
        try await runner.execute(
            """
            WITH reached AS (INSERT INTO notification_deliveries (notification_id, device_id)
                             SELECT \(notification)::uuid, unnest(\(delivered)::uuid[]) ON CONFLICT DO NOTHING),
                 told AS (DELETE FROM digest_likes WHERE notification_id = \(notification)::uuid)
            UPDATE notifications SET state = \(state), finished_at = now()
            WHERE notification_id = \(notification)::uuid AND state = 'pending'
            """
        )
    }

    /// When `user`'s last likes digest was sent, if ever.
    func lastDigest(of user: String, in runner: some SQLRunner) async throws -> PostgresTimestamp? {
        try await runner.query(
            """
            SELECT max(finished_at) FROM notifications
            WHERE user_id = \(user)::uuid AND kind = \(NotificationKind.likes.rawValue) AND state = 'sent'
            """
        ).first?.decode(PostgresTimestamp?.self, at: 0)
    }

    /// Queues a likes digest for `user`, due at `due`.
    func enqueueDigest(id: String, to user: String, due: PostgresTimestamp, in runner: some SQLRunner) async throws {
        try await runner.execute(
            """
            INSERT INTO notifications (notification_id, user_id, kind, source_id, collapse_key, next_attempt_at)
            VALUES (\(id)::uuid, \(user)::uuid, \(NotificationKind.likes.rawValue), \(id), \(LikesDigest.collapseKey), \(due))
            """
        )
    }

    /// Tries a pending notification again after `delay`; `attempt` counts it as a failed attempt (not so for quiet
    /// hours). `delivered`: the devices that got it on this attempt, recorded in the same statement (the retry skips
    /// them).
    func retry(
        _ notification: String, after delay: Duration, attempt: Bool, delivered: [String] = [],
        in runner: some SQLRunner
    ) async throws {
        try await runner.execute(
            """
            WITH reached AS (INSERT INTO notification_deliveries (notification_id, device_id)
                             SELECT \(notification)::uuid, unnest(\(delivered)::uuid[]) ON CONFLICT DO NOTHING)
            UPDATE notifications SET next_attempt_at = now() + \(Self.milliseconds(delay)) * interval '1 millisecond',
                                     attempts = attempts + \(attempt ? 1 : 0), claimed_at = NULL
            WHERE notification_id = \(notification)::uuid AND state = 'pending'
            """
        )
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}
