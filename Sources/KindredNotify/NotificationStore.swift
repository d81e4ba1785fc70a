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

    /// The newest pending notification of `kind` and `collapseKey` (a member's likes) to `user`, for
    /// ``LikesDigest`` to decide on, locked until the transaction ends (likes join a digest without changing its row).
    func waiting(
        _ kind: NotificationKind, to user: String, collapseKey: String, in transaction: PostgresTransaction
    ) async throws -> WaitingNotification? {
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

    /// What ``queueMessage(id:to:from:thread:message:collapseKey:delay:wantedByDefault:in:)`` did.
    enum MessageQueueing: Sendable, Hashable {
        /// The recipient turned message notifications off.
        case unwanted
        /// One of the two blocked the other.
        case blocked
        /// The thread's waiting notification took the message.
        case merged
        /// A new notification was queued.
        case queued
        /// The message has its notification already (a redelivery).
        case present
    }

    /// A message to `user` from `sender` in one statement (the event's whole work in notify's schema, one round
    /// trip): nothing when the recipient's settings (`settings`; `wantedByDefault` without a row) turn message
    /// notifications off or either member blocked the other (`blocks`); otherwise the thread's newest pending
    /// notification (`collapseKey`) takes it (its latest message, one more item; it stays due when it was) while no
    /// sender holds it and no attempt was made yet (``MessageCollapse``), or a new one is queued, due after `delay`.
    /// The merge checks its row in its own `WHERE`, so a sender claiming the notification meanwhile makes it queue a
    /// new one; nothing is locked to look. That `WHERE` also names the thread (member and collapse key), so that
    /// whichever index a plan made while the table was small picks, it reads the thread's rows only.
    func queueMessage(
        id: String, to user: String, from sender: String, thread: String, message: String, collapseKey: String,
        delay: Duration, wantedByDefault: Bool, in runner: some SQLRunner
    ) async throws -> MessageQueueing {
        let kind = NotificationKind.newMessage.rawValue
        let row = try await runner.query(
            """
            WITH facts AS (
                SELECT coalesce((SELECT new_message FROM settings WHERE user_id = \(user)::uuid), \(wantedByDefault)) AS wanted,
                       EXISTS (SELECT 1 FROM blocks
                               WHERE active AND ((blocker_id = \(sender)::uuid AND blocked_id = \(user)::uuid)
                                              OR (blocker_id = \(user)::uuid AND blocked_id = \(sender)::uuid))) AS blocked
            ), waiting AS (
                SELECT notification_id FROM notifications
                WHERE user_id = \(user)::uuid AND collapse_key = \(collapseKey) AND state = 'pending' AND kind = \(kind)
                ORDER BY created_at DESC LIMIT 1
            ), merged AS (
                UPDATE notifications SET latest_message_id = \(message)::uuid, item_count = item_count + 1
                WHERE notification_id = (SELECT notification_id FROM waiting)
                  AND user_id = \(user)::uuid AND collapse_key = \(collapseKey)
                  AND state = 'pending' AND claimed_at IS NULL AND attempts = 0
                  AND (SELECT wanted AND NOT blocked FROM facts)
                RETURNING 1
            ), queued AS (
                INSERT INTO notifications (notification_id, user_id, kind, subject_user_id, source_id, collapse_key,
                                           thread_id, latest_message_id, next_attempt_at)
                SELECT \(id)::uuid, \(user)::uuid, \(kind), \(sender)::uuid, \(message), \(collapseKey), \(thread)::uuid,
                       \(message)::uuid, now() + \(Self.milliseconds(delay)) * interval '1 millisecond'
                FROM facts WHERE wanted AND NOT blocked AND NOT EXISTS (SELECT 1 FROM merged)
                ON CONFLICT (user_id, kind, source_id) DO NOTHING
                RETURNING 1
            )
            SELECT wanted, blocked, EXISTS (SELECT 1 FROM merged), EXISTS (SELECT 1 FROM queued) FROM facts
            """
        ).first
        guard let row else { throw PostgresError(code: .queryFailed, reason: "the message statement returned no row") }
        let (wanted, blocked, merged, queued) = try row.decode((Bool, Bool, Bool, Bool).self)
        if !wanted { return .unwanted }
        if blocked { return .blocked }
        if merged { return .merged }
        return queued ? .queued : .present
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
    /// sender (or this one after a crash) takes them again only once the lease ran out. A notification waits while
    /// an older one of its collapse key (a thread's, a member's likes, a broadcaster's) is still pending (on its way,
    /// or due later): pushes under one collapse id reach the device in the order they were queued, so the newest
    /// is the one it keeps.
    func claimDue(limit: Int, lease: Duration, in runner: some SQLRunner) async throws -> [QueuedNotification] {
        try await runner.query(self.claimQuery(limit: limit, lease: lease)).compactMap { row in
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

    /// The statement of ``claimDue(limit:lease:in:)``.
    ///
    /// A connection plans each statement once, often while the queue is still empty, where every plan looks as
    /// cheap as any other; the plan must still hold when the queue is long. So the look for an older pending
    /// notification of the same collapse key is a subquery run for each due row (`OFFSET 0` keeps PostgreSQL from
    /// turning it into a join) that asks for the newest such row (`ORDER BY … LIMIT 1`), which only
    /// `notifications_collapsible` gives in order, by that member and key. Planned on an empty queue, the anti-join
    /// it replaces scanned the whole collapse index for every due row (326,000 buffers to claim 64 of 5,000), and
    /// the subquery without the order scanned the whole due index (7,600); now 1,400 (`QueuePlanTests`).
    func claimQuery(limit: Int, lease: Duration) -> PostgresQuery {
        """
        UPDATE notifications n SET next_attempt_at = now() + \(Self.milliseconds(lease)) * interval '1 millisecond',
                                   claimed_at = now()
        FROM (SELECT notification_id FROM notifications d WHERE state = 'pending' AND next_attempt_at <= now()
                AND NOT EXISTS (SELECT 1 FROM notifications o
                                WHERE o.user_id = d.user_id AND o.collapse_key = d.collapse_key
                                  AND o.state = 'pending'
                                  AND (o.created_at, o.notification_id) < (d.created_at, d.notification_id)
                                ORDER BY o.created_at DESC LIMIT 1 OFFSET 0)
              ORDER BY next_attempt_at LIMIT \(limit) FOR UPDATE SKIP LOCKED) due
        WHERE n.notification_id = due.notification_id
        RETURNING n.notification_id::text, n.user_id::text, n.kind, n.subject_user_id::text, n.collapse_key,
                  n.connection, n.attempts, n.thread_id::text, n.latest_message_id::text, n.item_count, n.activity,
                  n.expires_at
        """
    }

    /// The statement reading the devices each of `notifications` was delivered to already (for a pipeline:
    /// ``ClaimedBatch``).
    func deliveredDevicesQuery(of notifications: [String]) -> PostgresQuery {
        """
        SELECT notification_id::text, device_id::text FROM notification_deliveries
        WHERE notification_id = ANY(\(notifications)::uuid[])
        """
    }

    /// The devices ``deliveredDevicesQuery(of:)`` read, by notification (absent: none).
    func deliveredDevices(from rows: PostgresRows) throws -> [String: Set<String>] {
        var delivered: [String: Set<String>] = [:]
        for row in rows {
            let (notification, device) = try row.decode((String, String).self)
            delivered[notification, default: []].insert(device)
        }
        return delivered
    }

    /// Records how attempts ended, in one statement for all of them: a finished notification takes its state (a
    /// cancelled one stays cancelled) and the likes a digest stood for go with it (told, or not to be told); a retried
    /// one is due again after its delay and no longer claimed. The devices each reached on this attempt are recorded
    /// in the same statement (a retry skips them). Only pending rows change.
    ///
    /// Planned once for batches of any size (``PostgresConfiguration/genericPlans``), the statement finds its rows by
    /// primary key (`= ANY(ids)`) and checks their state afterwards: the state written as a plain `state = 'pending'`
    /// matched `notifications_due`, which the planner chose whenever its statistics showed fewer pending rows than
    /// a batch might hold (a likes digest stays pending for hours, so they are soon stale), then read every pending
    /// row (3.5 ms a batch with a thousand pending). `IS TRUE` changes nothing but that match. The digests' likes
    /// are joined to the finished ids, not filtered by `= ANY(…::uuid[])`: in a plan made without the values, such a
    /// filter converts the array at every row it reads.
    func record(_ ends: [NotificationEnd], in runner: some SQLRunner) async throws {
        guard !ends.isEmpty else { return }
        var (ids, states, delays, attempts) = ([String](), [String](), [Int64](), [Int32]())
        var (reachedIDs, reachedDevices, finishedIDs) = ([String](), [String](), [String]())
        for end in ends {
            ids.append(end.id)
            switch end.outcome {
            case .finished(let state):
                finishedIDs.append(end.id)
                states.append(state)
                delays.append(0)
                attempts.append(0)
            case .retry(let delay, let attempt):
                states.append("")
                delays.append(Self.milliseconds(delay))
                attempts.append(attempt ? 1 : 0)
            }
            reachedIDs += end.delivered.map { _ in end.id }
            reachedDevices += end.delivered
        }
        try await runner.execute(
            """
            WITH ends AS (SELECT * FROM unnest(\(ids)::uuid[], \(states)::text[], \(delays)::bigint[], \(attempts)::int[])
                          AS e(notification_id, state, delay_ms, attempt)),
                 reached AS (INSERT INTO notification_deliveries (notification_id, device_id)
                             SELECT * FROM unnest(\(reachedIDs)::uuid[], \(reachedDevices)::uuid[]) ON CONFLICT DO NOTHING),
                 told AS (DELETE FROM digest_likes d USING unnest(\(finishedIDs)::uuid[]) AS f(notification_id)
                          WHERE d.notification_id = f.notification_id)
            UPDATE notifications n
            SET state = CASE WHEN e.state = '' THEN n.state ELSE e.state END,
                finished_at = CASE WHEN e.state = '' THEN n.finished_at ELSE now() END,
                next_attempt_at = CASE WHEN e.state = '' THEN now() + e.delay_ms * interval '1 millisecond'
                                       ELSE n.next_attempt_at END,
                attempts = n.attempts + e.attempt,
                claimed_at = CASE WHEN e.state = '' THEN NULL ELSE n.claimed_at END
            FROM ends e WHERE n.notification_id = e.notification_id AND n.notification_id = ANY(\(ids)::uuid[])
              AND (n.state = 'pending') IS TRUE
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

    private static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}
