import KindredPostgres
import KindredProto

/// The SQL of messages (table `messages`).
struct MessageStore: Sendable {
    /// The message `sender` stored under `clientMessageID`, if any (idempotent retries).
    func find(sender: String, clientMessageID: String, in runner: some SQLRunner) async throws
        -> Kindred.Chat.V1.ChatMessage?
    {
        try await runner.query(
            """
            SELECT \(unescaped: Kindred.Chat.V1.ChatMessage.columns) FROM messages m
            WHERE m.sender_id = \(sender)::uuid AND m.client_message_id = \(clientMessageID)
            """
        ).first.map { try Kindred.Chat.V1.ChatMessage(row: $0) }
    }

    /// Stores a message; returns it as stored. The server timestamp is taken now, under the thread's lock (not at
    /// the transaction's start), so timestamps never go backwards as sequences go up.
    func insert(
        id: String, threadID: String, sequence: Int64, sender: String, clientMessageID: String, body: String,
        in transaction: PostgresTransaction
    ) async throws -> Kindred.Chat.V1.ChatMessage {
        try await transaction.query(
            """
            INSERT INTO messages AS m (message_id, thread_id, sequence, sender_id, client_message_id, body, sent_at)
            VALUES (\(id)::uuid, \(threadID)::uuid, \(sequence), \(sender)::uuid, \(clientMessageID), \(body),
                    clock_timestamp())
            RETURNING \(unescaped: Kindred.Chat.V1.ChatMessage.columns)
            """
        ).first.map { try Kindred.Chat.V1.ChatMessage(row: $0) }!
    }

    /// Messages `sender` sent in the last hour (the community's hourly limit).
    func sentInLastHour(by sender: String, in runner: some SQLRunner) async throws -> Int {
        try await runner.query(
            "SELECT count(*) FROM messages WHERE sender_id = \(sender)::uuid AND sent_at > now() - interval '1 hour'"
        ).scalar(Int.self)
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

    /// The id of the message at `sequence` in a thread.
    func id(at sequence: Int64, in threadID: String, in runner: some SQLRunner) async throws -> String? {
        try await runner.query(
            "SELECT message_id::text FROM messages WHERE thread_id = \(threadID)::uuid AND sequence = \(sequence)"
        ).first?.decode(String.self, at: 0)
    }

    /// Messages by id (admin: report evidence).
    func byIDs(_ ids: [String], in runner: some SQLRunner) async throws -> [Kindred.Chat.V1.ChatMessage] {
        try await runner.query(
            """
            SELECT \(unescaped: Kindred.Chat.V1.ChatMessage.columns) FROM messages m
            WHERE m.message_id = ANY(\(ids)::uuid[])
            """
        ).map { try Kindred.Chat.V1.ChatMessage(row: $0) }
    }
}
