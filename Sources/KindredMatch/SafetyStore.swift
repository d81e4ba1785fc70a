import KindredPostgres
import KindredProto

/// The SQL of blocks and reports (tables `blocks`, `reports`).
struct SafetyStore: Sendable {
    /// Records the block; false when the caller had already blocked the target.
    func block(blocker: String, blocked: String, in transaction: PostgresTransaction) async throws -> Bool {
        try await transaction.execute(
            """
            INSERT INTO blocks (blocker, blocked, created_at) VALUES (\(blocker)::uuid, \(blocked)::uuid, now())
            ON CONFLICT DO NOTHING
            """) == 1
    }

    /// Lifts the caller's block; false when there was none.
    func unblock(blocker: String, blocked: String, in transaction: PostgresTransaction) async throws -> Bool {
        try await transaction.execute(
            "DELETE FROM blocks WHERE blocker = \(blocker)::uuid AND blocked = \(blocked)::uuid") == 1
    }

    /// The caller's blocks, newest first.
    func blocks(of blocker: String, limit: Int, offset: Int, on database: PostgresClient) async throws
        -> [(String, Int64)]
    {
        try await database.query(
            """
            SELECT blocked::text, created_at FROM blocks WHERE blocker = \(blocker)::uuid
            ORDER BY created_at DESC, blocked DESC LIMIT \(limit) OFFSET \(offset)
            """
        ).map { (try $0.decode(String.self, at: 0), try $0.decode(PostgresTimestamp.self, at: 1).millisecondsSinceEpoch) }
    }

    private static let columns = """
        report_id::text, reporter::text, reported::text, community_id, reason::int4, details, message_ids, photo_ids,
        status::int4, resolution::int4, resolution_note, resolved_by::text, created_at, resolved_at
        """

    private func report(_ row: PostgresRow) throws -> ReportRow {
        ReportRow(
            id: try row.decode(String.self, at: 0),
            reporter: try row.decode(String.self, at: 1),
            reported: try row.decode(String.self, at: 2),
            community: try row.decode(String.self, at: 3),
            reason: try row.decode(Int32.self, at: 4),
            details: try row.decode(String.self, at: 5),
            messageIDs: try row.decode([String].self, at: 6),
            photoIDs: try row.decode([String].self, at: 7),
            status: try row.decode(Int32.self, at: 8),
            resolution: try row.decode(Int32.self, at: 9),
            note: try row.decode(String.self, at: 10),
            resolvedBy: try row.decode(String?.self, at: 11),
            createdUnixMs: try row.decode(PostgresTimestamp.self, at: 12).millisecondsSinceEpoch,
            resolvedUnixMs: try row.decode(PostgresTimestamp?.self, at: 13)?.millisecondsSinceEpoch
        )
    }

    /// Files a report, or returns the one filed earlier with the same idempotency key (`created` false).
    func file(_ report: ReportRow, key: String, in transaction: PostgresTransaction) async throws
        -> (report: ReportRow, created: Bool)
    {
        let inserted = try await transaction.execute(
            """
            INSERT INTO reports (report_id, reporter, reported, community_id, reason, details, message_ids, photo_ids,
                                 created_at, idempotency_key)
            VALUES (\(report.id)::uuid, \(report.reporter)::uuid, \(report.reported)::uuid, \(report.community),
                    \(report.reason)::int2, \(report.details), \(report.messageIDs), \(report.photoIDs), now(), \(key))
            ON CONFLICT (reporter, idempotency_key) DO NOTHING
            """)
        let row = try await transaction.query(
            """
            SELECT \(unescaped: Self.columns) FROM reports WHERE reporter = \(report.reporter)::uuid AND idempotency_key = \(key)
            """
        ).first
        guard let row else { throw PostgresError(code: .queryFailed, reason: "report vanished after insert") }
        return (try self.report(row), inserted == 1)
    }

    /// Reports for admins: open ones oldest first, then resolved ones newest first.
    func list(
        status: Int32, reported: String?, community: String?, limit: Int, offset: Int, on database: PostgresClient
    ) async throws -> [ReportRow] {
        try await database.query(
            """
            SELECT \(unescaped: Self.columns) FROM reports
            WHERE (\(status)::int4 = 0 OR status = \(status)::int4)
              AND (\(reported)::uuid IS NULL OR reported = \(reported)::uuid)
              AND (\(community)::text IS NULL OR community_id = \(community)::text)
            ORDER BY status, CASE WHEN status = 1 THEN created_at END ASC, resolved_at DESC, report_id
            LIMIT \(limit) OFFSET \(offset)
            """
        ).map { try self.report($0) }
    }

    /// One report by id (nil: no such report).
    func report(id reportID: String, on database: PostgresClient) async throws -> ReportRow? {
        try await database.query(
            "SELECT \(unescaped: Self.columns) FROM reports WHERE report_id = \(reportID)::uuid"
        ).first.map { try self.report($0) }
    }

    func lock(reportID: String, in transaction: PostgresTransaction) async throws -> ReportRow? {
        try await transaction.query(
            "SELECT \(unescaped: Self.columns) FROM reports WHERE report_id = \(reportID)::uuid FOR UPDATE"
        ).first.map { try self.report($0) }
    }

    func resolve(reportID: String, resolution: Int32, note: String, by admin: String, in transaction: PostgresTransaction)
        async throws -> ReportRow
    {
        let row = try await transaction.query(
            """
            UPDATE reports SET status = 2, resolution = \(resolution)::int2, resolution_note = \(note),
                               resolved_by = \(admin)::uuid, resolved_at = now()
            WHERE report_id = \(reportID)::uuid
            RETURNING \(unescaped: Self.columns)
            """
        ).first
        guard let row else { throw PostgresError(code: .queryFailed, reason: "report vanished") }
        return try self.report(row)
    }
}
