import KindredPostgres
import KindredProto

/// The SQL of messages (table `messages`).
struct MessageStore: Sendable {
    /// The statement that stores `message` as the thread's next (its sequence is the thread's last plus one and its
    /// time was read under the thread's row lock, which the caller holds) and moves the thread's last sequence.
    static func appendQuery(_ message: Kindred.Chat.V1.ChatMessage) -> PostgresQuery {
        let sentAt = PostgresTimestamp(millisecondsSinceEpoch: message.sentUnixMs)
        return """
            WITH s AS (UPDATE threads SET last_sequence = \(message.sequence), last_activity_at = now()
                       WHERE thread_id = \(message.threadId)::uuid)
            INSERT INTO messages (message_id, thread_id, sequence, sender_id, client_message_id, body, sent_at)
            VALUES (\(message.messageId)::uuid, \(message.threadId)::uuid, \(message.sequence),
                    \(message.senderUserId)::uuid, \(message.clientMessageId), \(message.body), \(sentAt))
            """
    }

    /// A page of a thread's messages after (NEWER, ascending) or before (OLDER, descending) `sequence`.
    func page(
        threadID: String, newer: Bool, from sequence: Int64, limit: Int, in runner: some SQLRunner
    ) async throws -> [Kindred.Chat.V1.ChatMessage] {
        let rows =
            if newer {
                try await runner.query(
                    """
                    SELECT \(unescaped: Kindred.Chat.V1.ChatMessage.columns) FROM messages m
                    WHERE m.thread_id = \(threadID)::uuid AND m.sequence > \(sequence) ORDER BY m.sequence LIMIT \(limit)
                    """
                )
            } else {
                try await runner.query(
                    """
                    SELECT \(unescaped: Kindred.Chat.V1.ChatMessage.columns) FROM messages m
                    WHERE m.thread_id = \(threadID)::uuid AND m.sequence < \(sequence)
                    ORDER BY m.sequence DESC LIMIT \(limit)
                    """
                )
            }
        return try rows.map { try Kindred.Chat.V1.ChatMessage(row: $0) }
    }

    /// A message of a thread by id.
    func find(_ messageID: String, in threadID: String, in runner: some SQLRunner) async throws
        -> Kindred.Chat.V1.ChatMessage?
    {
        try await runner.query(
            """
            SELECT \(unescaped: Kindred.Chat.V1.ChatMessage.columns) FROM messages m
            WHERE m.message_id = \(messageID)::uuid AND m.thread_id = \(threadID)::uuid
            """
        ).first.map { try Kindred.Chat.V1.ChatMessage(row: $0) }
    }

    /// Messages by id (admin: report evidence); with `between`, only those of threads between exactly those two
    /// users.
    func byIDs(_ ids: [String], between pair: (String, String)? = nil, in runner: some SQLRunner) async throws
        -> [Kindred.Chat.V1.ChatMessage]
    {
        try await runner.query(self.byIDsQuery(ids, between: pair)).map { try Kindred.Chat.V1.ChatMessage(row: $0) }
    }

    /// The statement of ``byIDs(_:between:in:)``: rows of `Kindred.Chat.V1.ChatMessage`.
    func byIDsQuery(_ ids: [String], between pair: (String, String)? = nil) -> PostgresQuery {
        let (first, second) = pair.map { $0 < $1 ? ($0, $1) : ($1, $0) } ?? (nil, nil)
        return """
            SELECT \(unescaped: Kindred.Chat.V1.ChatMessage.columns) FROM messages m
            JOIN threads t ON t.thread_id = m.thread_id
            WHERE m.message_id = ANY(\(ids)::uuid[])
              AND (\(first)::uuid IS NULL OR (t.user_a = \(first)::uuid AND t.user_b = \(second)::uuid))
            """
    }
}
