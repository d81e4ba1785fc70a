import KindredPostgres
import KindredProtobuf
import KindredProto

/// The SQL of each user's event log (table `stream_events`, counter `users.event_sequence`): what Subscribe
/// streams and resumes from. An append takes the next position of the user's counter (the row is locked until
/// commit, so positions commit in order) and is announced with a NOTIFY queued for the commit
/// (``PostgresTransaction/queueNotification(channel:payload:)``): listeners hear it after the commit, never before,
/// and a stream that hears of a position beyond the next reads the log up to it (`SubscriptionCursor`), so
/// notifications of two commits that arrive crossed still deliver in order.
struct EventLogStore: Sendable {
    /// The NOTIFY channel of every chat-server replica.
    static let channel = "kindred_chat"
    /// Largest encoded event carried in a notification (PostgreSQL's limit is 8000 bytes); larger ones are read
    /// from the table by the subscriber.
    static let maxInlineEventBytes = 5000

    /// One stored event.
    struct Entry: Sendable, Hashable {
        var sequence: Int64
        var event: Kindred.Chat.V1.ChatEvent
    }

    /// Appends `event` to `user`'s log; returns its position. The user's row must exist.
    @discardableResult
    func append(
        _ event: Kindred.Chat.V1.ChatEvent, to user: String, threadID: String?, in transaction: PostgresTransaction
    ) async throws -> Int64 {
        let bytes = try event.serializedBytes()
        let rows = try await transaction.query(
            """
            WITH s AS (UPDATE users SET event_sequence = event_sequence + 1 WHERE user_id = \(user)::uuid
                       RETURNING event_sequence),
                 i AS (INSERT INTO stream_events (user_id, sequence, thread_id, event, occurred_at)
                       SELECT \(user)::uuid, event_sequence, \(threadID)::uuid, \(bytes),
                              to_timestamp(\(Double(event.occurredUnixMs) / 1000))
                       FROM s RETURNING sequence)
            SELECT sequence FROM i
            """
        )
        guard let row = rows.first else { throw ChatError(.unavailable, "The service is busy; try again") }
        let sequence = try row.decode(Int64.self, at: 0)
        transaction.queueNotification(
            channel: Self.channel, payload: Self.notice(user: user, sequence: sequence, inline: Self.inline(bytes)))
        return sequence
    }

    /// An event appended to the logs of both members of a thread (a message goes to both) by one statement.
    struct BothLogs {
        /// The statement; its rows are the two users' ids and positions.
        var query: PostgresQuery
        var inline: String

        /// Queues the two notifications for the commit, from the statement's rows.
        func announce(_ rows: PostgresRows, in transaction: PostgresTransaction) throws {
            for row in rows {
                transaction.queueNotification(
                    channel: EventLogStore.channel,
                    payload: EventLogStore.notice(
                        user: try row.decode(String.self, at: 0), sequence: try row.decode(Int64.self, at: 1),
                        inline: self.inline))
            }
        }
    }

    /// Appends `event` to the logs of both members of a thread; their rows must be locked by the caller, in id
    /// order. The two ids are two parameters, not an array: PostgreSQL plans a statement over an array of unknown
    /// length anew at every call, and this is one call per message.
    static func appendQuery(
        _ event: Kindred.Chat.V1.ChatEvent, toBoth first: String, _ second: String, threadID: String?
    ) throws -> BothLogs {
        let bytes = try event.serializedBytes()
        let query: PostgresQuery = """
            WITH s AS (UPDATE users SET event_sequence = event_sequence + 1
                       WHERE user_id IN (\(first)::uuid, \(second)::uuid)
                       RETURNING user_id, event_sequence),
                 i AS (INSERT INTO stream_events (user_id, sequence, thread_id, event, occurred_at)
                       SELECT user_id, event_sequence, \(threadID)::uuid, \(bytes),
                              to_timestamp(\(Double(event.occurredUnixMs) / 1000))
                       FROM s RETURNING user_id, sequence)
            SELECT user_id::text, sequence FROM i ORDER BY user_id
            """
        return BothLogs(query: query, inline: Self.inline(bytes))
    }

    /// A notification's payload: `e <user> <sequence> <base64 event, or - when it is too large to carry>`.
    static func notice(user: String, sequence: Int64, inline: String) -> String {
        "e \(user) \(sequence) \(inline)"
    }

    private static func inline(_ bytes: [UInt8]) -> String {
        bytes.count <= Self.maxInlineEventBytes ? Base64.encode(bytes, padding: false) : "-"
    }

    /// Up to `limit` events of `user`'s log after `sequence`, in order.
    func events(of user: String, after sequence: Int64, limit: Int, in runner: some SQLRunner) async throws -> [Entry] {
        try await runner.query(
            """
            SELECT sequence, event FROM stream_events WHERE user_id = \(user)::uuid AND sequence > \(sequence)
            ORDER BY sequence LIMIT \(limit)
            """
        ).map { row in
            Entry(
                sequence: try row.decode(Int64.self, at: 0),
                event: try Kindred.Chat.V1.ChatEvent(serializedBytes: try row.decode([UInt8].self, at: 1))
            )
        }
    }

    /// The last position of `user`'s log and the last purged one (0, 0 for a user chat does not know).
    func position(of user: String, in runner: some SQLRunner) async throws -> (last: Int64, purgedThrough: Int64) {
        guard
            let row = try await runner.query(
                "SELECT event_sequence, purged_through FROM users WHERE user_id = \(user)::uuid"
            ).first
        else { return (0, 0) }
        return (try row.decode(Int64.self, at: 0), try row.decode(Int64.self, at: 1))
    }

    /// Deletes events older than `seconds` and remembers, per user, the last position purged.
    @discardableResult
    func purge(olderThanSeconds seconds: Int64, in runner: some SQLRunner) async throws -> Int {
        try await runner.execute(
            """
            WITH d AS (DELETE FROM stream_events WHERE occurred_at < now() - make_interval(secs => \(Double(seconds)))
                       RETURNING user_id, sequence)
            UPDATE users u SET purged_through = GREATEST(u.purged_through, m.last)
            FROM (SELECT user_id, max(sequence) AS last FROM d GROUP BY user_id) m WHERE u.user_id = m.user_id
            """
        )
    }

    /// Sends an ephemeral event (typing) to `user`'s live subscribers: NOTIFY only, nothing stored.
    func notifyEphemeral(_ event: Kindred.Chat.V1.ChatEvent, to user: String, through database: PostgresClient) throws {
        let payload = "t \(user) " + Base64.encode(try event.serializedBytes(), padding: false)
        database.queueNotification(channel: Self.channel, payload: payload)
    }

    /// Tells every replica's streams to read their logs for what they may have missed (sent when a replica starts):
    /// a replica that stopped between a commit and its notification never sent it.
    static func resynchronizeAll(through database: PostgresClient) {
        database.queueNotification(channel: Self.channel, payload: "r")
    }

    /// Deletes `user`'s log and every event about the given threads (account deletion).
    func erase(user: String, threads: [String], in transaction: PostgresTransaction) async throws {
        try await transaction.execute("DELETE FROM stream_events WHERE user_id = \(user)::uuid")
        try await transaction.execute("DELETE FROM stream_events WHERE thread_id = ANY(\(threads)::uuid[])")
    }
}
