import KindredPostgres
import KindredProto

/// The SQL of threads and their participants' read and delivery positions (tables `threads`, `read_states`).
struct ThreadStore: Sendable {
    /// Creates the thread and both participants' positions; false when it existed (idempotent per match id).
    func open(
        threadID: String, users: (String, String), communityID: String, initiator: String?, mode: Int32,
        createdUnixMs: Int64, in transaction: PostgresTransaction
    ) async throws -> Bool {
        let created = try await transaction.execute(
            """
            INSERT INTO threads (thread_id, user_a, user_b, community_id, initiator, mode, created_at, last_activity_at)
            VALUES (\(threadID)::uuid, \(users.0)::uuid, \(users.1)::uuid, \(communityID), \(initiator)::uuid,
                    \(Int(mode)), to_timestamp(\(Double(createdUnixMs) / 1000)), to_timestamp(\(Double(createdUnixMs) / 1000)))
            ON CONFLICT (thread_id) DO NOTHING
            """
        )
        guard created == 1 else { return false }
        try await transaction.execute(
            """
            INSERT INTO read_states (thread_id, user_id)
            VALUES (\(threadID)::uuid, \(users.0)::uuid), (\(threadID)::uuid, \(users.1)::uuid)
            """
        )
        return true
    }

    /// The thread if `user` takes part in it (nil otherwise: unknown and foreign threads look the same).
    /// `lock` takes the row lock that orders a thread's messages.
    func find(_ threadID: String, for user: String, lock: Bool = false, in runner: some SQLRunner) async throws
        -> ThreadRecord?
    {
        try await runner.query(self.findQuery(threadID, for: user, lock: lock)).first.map { try ThreadRecord(row: $0) }
    }

    /// The statement of ``find(_:for:lock:in:)``: at most one row, a ``ThreadRecord``.
    func findQuery(_ threadID: String, for user: String, lock: Bool = false) -> PostgresQuery {
        """
        SELECT \(unescaped: ThreadRecord.columns) FROM \(unescaped: ThreadRecord.from)
        WHERE t.thread_id = \(threadID)::uuid AND (t.user_a = \(user)::uuid OR t.user_b = \(user)::uuid)
        \(unescaped: lock ? "FOR UPDATE OF t" : "")
        """
    }

    /// What a send needs, read under the thread's row lock by the statement of
    /// ``lockForSendQuery(_:by:clientMessageID:countUpTo:)``.
    struct SendState {
        /// The thread as the sender sees it (`lastSequence` is the last message's).
        var thread: ThreadRecord
        /// The community's hourly limit, nil when unknown.
        var limit: Int?
        /// How many messages the sender sent in the last hour (``UserStore/sentLastHour``).
        var sentLastHour: Int
        /// The message the sender already stored under the client message id (a retry).
        var stored: Kindred.Chat.V1.ChatMessage?
        /// The server's time, in whole milliseconds (what the API carries), read under the locks: the next message's
        /// time, so that times never go backwards as sequences go up.
        var now: PostgresTimestamp

        /// nil when the statement found no thread the sender takes part in.
        init?(_ rows: PostgresRows) throws {
            guard let row = rows.first else { return nil }
            self.thread = try ThreadRecord(row: row)
            self.limit = try row.decode(Int32?.self, at: ThreadRecord.columnCount).flatMap { $0 > 0 ? Int($0) : nil }
            self.sentLastHour = try row.decode(Int.self, at: ThreadRecord.columnCount + 1)
            self.now = try row.decode(PostgresTimestamp.self, at: ThreadRecord.columnCount + 2)
            let storedAt = ThreadRecord.columnCount + 3
            self.stored =
                try row.decode(String?.self, at: storedAt) == nil
                ? nil : try Kindred.Chat.V1.ChatMessage(row: row, at: storedAt)
        }
    }

    /// The statement that reads a send's ``SendState`` in one go under the thread's row lock: the thread as `user`
    /// sees it, the community's hourly limit, how many messages `user` sent in the last hour, the time and the
    /// message `user` already stored under `clientMessageID`. It runs after ``lockParticipantsQuery(of:for:)`` in the
    /// same transaction: its snapshot, taken after the sender's row lock, sees a concurrent retry that committed
    /// first, and the sender's counts as the last send left them.
    static func lockForSendQuery(_ threadID: String, by user: String, clientMessageID: String) -> PostgresQuery {
        """
        SELECT \(unescaped: ThreadRecord.columns),
               (SELECT hourly_message_limit FROM communities c WHERE c.community_id = t.community_id),
               (SELECT \(unescaped: UserStore.sentLastHour) FROM users WHERE user_id = \(user)::uuid),
               date_trunc('milliseconds', clock_timestamp()),
               \(unescaped: Kindred.Chat.V1.ChatMessage.columns)
        FROM \(unescaped: ThreadRecord.from)
        LEFT JOIN LATERAL (
            SELECT * FROM messages WHERE sender_id = \(user)::uuid AND client_message_id = \(clientMessageID)
        ) m ON true
        WHERE t.thread_id = \(threadID)::uuid AND (t.user_a = \(user)::uuid OR t.user_b = \(user)::uuid)
        FOR UPDATE OF t
        """
    }

    /// The statement that locks the two participants' user rows (in id order, the order every writer takes) of a
    /// thread `user` takes part in: two rows, or none when there is no such thread. The users are joined on
    /// `user_id = ANY(ARRAY[user_a, user_b])`, which the planner answers with two primary-key lookups at any table
    /// size (it plans an `IN (SELECT unnest(…))` semi-join as a scan of all of `users` while the table is small
    /// enough for a hash join to look cheaper); a test checks the plan.
    static func lockParticipantsQuery(of threadID: String, for user: String) -> PostgresQuery {
        """
        SELECT u.user_id FROM threads t JOIN users u ON u.user_id = ANY(ARRAY[t.user_a, t.user_b])
        WHERE t.thread_id = \(threadID)::uuid AND (t.user_a = \(user)::uuid OR t.user_b = \(user)::uuid)
        ORDER BY u.user_id FOR UPDATE OF u
        """
    }

    /// Any thread by id (service and event paths), locked when `lock`.
    func find(_ threadID: String, lock: Bool, in transaction: PostgresTransaction) async throws -> ThreadRecord? {
        let rows = try await transaction.query(
            """
            SELECT \(unescaped: ThreadRecord.columns) FROM \(unescaped: ThreadRecord.from)
            WHERE t.thread_id = \(threadID)::uuid \(unescaped: lock ? "FOR UPDATE OF t" : "")
            """
        )
        return try rows.first.map { try ThreadRecord(row: $0) }
    }

    /// Open threads between two users (a block closes them all).
    func openThreads(between first: String, and second: String, in transaction: PostgresTransaction) async throws
        -> [String]
    {
        let (a, b) = first < second ? (first, second) : (second, first)
        let rows = try await transaction.query(
            """
            SELECT thread_id::text FROM threads
            WHERE user_a = \(a)::uuid AND user_b = \(b)::uuid AND state = 'open' ORDER BY thread_id FOR UPDATE
            """
        )
        return try rows.map { try $0.decode(String.self, at: 0) }
    }

    /// Marks the thread closed; false when it was closed already.
    func close(_ threadID: String, reason: Int32, by user: String?, in transaction: PostgresTransaction) async throws
        -> Bool
    {
        try await transaction.execute(
            """
            UPDATE threads SET state = 'closed', close_reason = \(Int(reason)), closed_by = \(user)::uuid, closed_at = now()
            WHERE thread_id = \(threadID)::uuid AND state = 'open'
            """
        ) == 1
    }

    /// Moves `user`'s read or delivery position forward (never back); returns the position now held and
    /// whether it moved. Reading implies delivery: a read position lifts the delivered one too.
    func advance(
        _ position: Position, of user: String, in threadID: String, to sequence: Int64,
        in transaction: PostgresTransaction
    ) async throws -> (position: Int64, moved: Bool) {
        let rows: PostgresRows
        switch position {
        case .read:
            rows = try await transaction.query(
                """
                UPDATE read_states SET read_up_to = \(sequence), delivered_up_to = GREATEST(delivered_up_to, \(sequence))
                WHERE thread_id = \(threadID)::uuid AND user_id = \(user)::uuid AND read_up_to < \(sequence)
                RETURNING read_up_to
                """
            )
        case .delivered:
            rows = try await transaction.query(
                """
                UPDATE read_states SET delivered_up_to = \(sequence)
                WHERE thread_id = \(threadID)::uuid AND user_id = \(user)::uuid AND delivered_up_to < \(sequence)
                RETURNING delivered_up_to
                """
            )
        }
        if let row = rows.first { return (try row.decode(Int64.self, at: 0), true) }
        let current = try await transaction.query(
            """
            SELECT read_up_to, delivered_up_to FROM read_states WHERE thread_id = \(threadID)::uuid AND user_id = \(user)::uuid
            """
        )
        return (try current.first?.decode(Int64.self, at: position == .read ? 0 : 1) ?? 0, false)
    }

    enum Position: Sendable { case read, delivered }

    /// Messages of the other participant after `user`'s read position in one thread.
    func unread(in threadID: String, for user: String, in runner: some SQLRunner) async throws -> Int32 {
        Int32(
            try await runner.query(
                """
                SELECT count(*) FROM messages m JOIN read_states r ON r.thread_id = m.thread_id AND r.user_id = \(user)::uuid
                WHERE m.thread_id = \(threadID)::uuid AND m.sequence > r.read_up_to AND m.sender_id <> \(user)::uuid
                """
            ).scalar(Int64.self)
        )
    }

    /// Unread messages and threads with unread messages across `user`'s open, visible threads.
    func unreadTotals(for user: String, in runner: some SQLRunner) async throws -> (messages: Int32, threads: Int32) {
        try Self.unreadTotals(from: try await runner.query(self.unreadTotalsQuery(for: user)))
    }

    /// The statement of ``unreadTotals(for:in:)``; its rows read by ``unreadTotals(from:)``.
    func unreadTotalsQuery(for user: String) -> PostgresQuery {
        """
        SELECT count(*), count(DISTINCT m.thread_id)
        FROM \(unescaped: ThreadRecord.from)
        JOIN read_states r ON r.thread_id = t.thread_id AND r.user_id = \(user)::uuid
        JOIN messages m ON m.thread_id = t.thread_id AND m.sequence > r.read_up_to AND m.sender_id <> \(user)::uuid
        WHERE (t.user_a = \(user)::uuid OR t.user_b = \(user)::uuid) AND t.state = 'open'
          AND NOT ua.deactivated AND NOT ub.deactivated
        """
    }

    static func unreadTotals(from rows: PostgresRows) throws -> (messages: Int32, threads: Int32) {
        let row = rows[0]
        return (Int32(clamping: try row.decode(Int64.self, at: 0)), Int32(clamping: try row.decode(Int64.self, at: 1)))
    }

    /// The caller's view of threads: open and visible ones by last activity (`ids == nil`, paged), or the
    /// given ids (open or closed, visible), in no particular order.
    func summaries(
        for user: String, ids: [String]?, limit: Int, offset: Int, in runner: some SQLRunner
    ) async throws -> [Kindred.Chat.V1.ChatThread] {
        let byID = ids != nil
        let query: PostgresQuery = """
            SELECT t.thread_id::text, CASE WHEN t.user_a = \(user)::uuid THEN t.user_b ELSE t.user_a END::text,
                   t.state, (extract(epoch FROM t.created_at) * 1000)::bigint,
                   (extract(epoch FROM t.last_activity_at) * 1000)::bigint,
                   (SELECT count(*) FROM messages u WHERE u.thread_id = t.thread_id AND u.sequence > mine.read_up_to
                        AND u.sender_id <> \(user)::uuid),
                   CASE WHEN ua.hide_read_receipts OR ub.hide_read_receipts THEN NULL ELSE
                       (SELECT r.message_id::text FROM messages r WHERE r.thread_id = t.thread_id
                            AND r.sender_id = \(user)::uuid AND r.sequence <= theirs.read_up_to
                        ORDER BY r.sequence DESC LIMIT 1) END,
                   (SELECT d.message_id::text FROM messages d WHERE d.thread_id = t.thread_id
                        AND d.sender_id = \(user)::uuid AND d.sequence <= theirs.delivered_up_to
                    ORDER BY d.sequence DESC LIMIT 1),
                   m.message_id IS NOT NULL,
                   \(unescaped: Kindred.Chat.V1.ChatMessage.columns)
            FROM \(unescaped: ThreadRecord.from)
            JOIN read_states mine ON mine.thread_id = t.thread_id AND mine.user_id = \(user)::uuid
            JOIN read_states theirs ON theirs.thread_id = t.thread_id AND theirs.user_id <> \(user)::uuid
            LEFT JOIN messages m ON m.thread_id = t.thread_id AND m.sequence = t.last_sequence
            WHERE (t.user_a = \(user)::uuid OR t.user_b = \(user)::uuid) AND NOT ua.deactivated AND NOT ub.deactivated
              AND (\(byID) OR t.state = 'open') AND (NOT \(byID) OR t.thread_id = ANY(\(ids ?? [])::uuid[]))
            ORDER BY t.last_activity_at DESC, t.thread_id LIMIT \(limit) OFFSET \(offset)
            """
        let rows = try await runner.query(query)
        return try rows.map { row in
            var thread = Kindred.Chat.V1.ChatThread()
            thread.threadId = try row.decode(String.self, at: 0)
            thread.otherUserId = try row.decode(String.self, at: 1)
            thread.state = try row.decode(String.self, at: 2) == "open" ? .open : .closed
            thread.createdUnixMs = try row.decode(Int64.self, at: 3)
            thread.lastActivityUnixMs = try row.decode(Int64.self, at: 4)
            thread.unreadCount = Int32(clamping: try row.decode(Int64.self, at: 5))
            thread.otherReadUpToMessageId = try row.decode(String?.self, at: 6) ?? ""
            thread.otherDeliveredUpToMessageId = try row.decode(String?.self, at: 7) ?? ""
            if try row.decode(Bool.self, at: 8) {
                thread.lastMessage = try Kindred.Chat.V1.ChatMessage(row: row, at: 9)
            }
            return thread
        }
    }

    /// Every thread `user` takes part in, locked (account deletion).
    func all(of user: String, in transaction: PostgresTransaction) async throws -> [ThreadRecord] {
        try await transaction.query(
            """
            SELECT \(unescaped: ThreadRecord.columns) FROM \(unescaped: ThreadRecord.from)
            WHERE t.user_a = \(user)::uuid OR t.user_b = \(user)::uuid ORDER BY t.thread_id FOR UPDATE OF t
            """
        ).map { try ThreadRecord(row: $0) }
    }

    /// Deletes threads with their messages and positions.
    func delete(_ threadIDs: [String], in transaction: PostgresTransaction) async throws {
        try await transaction.execute("DELETE FROM threads WHERE thread_id = ANY(\(threadIDs)::uuid[])")
    }
}
