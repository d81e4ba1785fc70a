import KindredPostgres
import KindredProto

extension Kindred.Chat.V1.ChatMessage {
    /// Columns of `messages m` in the order `init(row:at:)` reads them.
    static let columns = """
        m.message_id::text, m.thread_id::text, m.sender_id::text, m.client_message_id, m.body, m.sequence,
        (extract(epoch FROM m.sent_at) * 1000)::bigint
        """

    init(row: PostgresRow, at first: Int = 0) throws {
        self.init()
        self.messageId = try row.decode(String.self, at: first)
        self.threadId = try row.decode(String.self, at: first + 1)
        self.senderUserId = try row.decode(String.self, at: first + 2)
        self.clientMessageId = try row.decode(String.self, at: first + 3)
        self.body = try row.decode(String.self, at: first + 4)
        self.sequence = try row.decode(Int64.self, at: first + 5)
        self.sentUnixMs = try row.decode(Int64.self, at: first + 6)
    }
}
