import KindredOpenSSL
import KindredPostgres

/// One queued mail claimed by the relay.
struct ClaimedMail: Sendable {
    var id: Int64
    var attempts: Int32
    var recipient: String
    var subject: String
    var body: String
    var createdAt: PostgresTimestamp
}

/// The SQL of the mail outbox (table `mail_outbox`): handlers queue mail in their transaction, `MailRelay`
/// claims, sends and marks it. A row's address, subject and body are erased once its outcome is known.
struct MailOutboxStore: Sendable {
    /// Queues `mail`. The address, subject and body stay only until the relay has the outcome; the SHA-256 of
    /// the address and the template stay until the retention purge.
    func enqueue(_ mail: OutgoingMail, accountID: String?, in transaction: PostgresTransaction) async throws {
        try await transaction.execute(
            """
            INSERT INTO mail_outbox (account_id, template, recipient_hash, recipient, subject, text_body)
            VALUES (\(accountID), \(mail.template), \(SHA256.hash(Array(mail.recipient.utf8))), \(mail.recipient),
                    \(mail.subject), \(mail.body))
            """
        )
    }

    /// Claims up to `limit` due rows (`FOR UPDATE SKIP LOCKED`, so several relays share the work) and leases
    /// them for `leaseSeconds` by moving `next_attempt_at`.
    func claimDue(limit: Int, leaseSeconds: Double, in database: PostgresClient) async throws -> [ClaimedMail] {
        try await database.withTransaction { transaction in
            let rows = try await transaction.query(
                """
                SELECT id, recipient, subject, text_body, attempts, created_at FROM mail_outbox
                WHERE sent_at IS NULL AND failed_at IS NULL AND next_attempt_at <= now()
                ORDER BY id LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED
                """
            )
            let claimed = try rows.map { row in
                let (id, recipient, subject, body, attempts, created) = try row.decode(
                    (Int64, String, String, String, Int32, PostgresTimestamp).self
                )
                return ClaimedMail(
                    id: id,
                    attempts: attempts,
                    recipient: recipient,
                    subject: subject,
                    body: body,
                    createdAt: created
                )
            }
            if !claimed.isEmpty {
                try await transaction.execute(
                    """
                    UPDATE mail_outbox SET next_attempt_at = now() + make_interval(secs => \(leaseSeconds))
                    WHERE id = ANY(\(claimed.map(\.id)))
                    """
                )
            }
            return claimed
        }
    }

    /// The SMTP server accepted the mail: done, content erased.
    func markSent(id: Int64, in database: PostgresClient) async throws {
        try await database.execute(
            """
            UPDATE mail_outbox SET sent_at = now(), attempts = attempts + 1,
                recipient = NULL, subject = NULL, text_body = NULL
            WHERE id = \(id)
            """
        )
    }

    /// A transient failure: tried again after `delaySeconds`.
    func scheduleRetry(id: Int64, error: String, delaySeconds: Int64, in database: PostgresClient) async throws {
        try await database.execute(
            """
            UPDATE mail_outbox SET attempts = attempts + 1, last_error = \(error),
                next_attempt_at = now() + make_interval(secs => \(Double(delaySeconds)))
            WHERE id = \(id)
            """
        )
    }

    /// Failed for good: content erased.
    func markFailed(id: Int64, error: String, in database: PostgresClient) async throws {
        try await database.execute(
            """
            UPDATE mail_outbox SET attempts = attempts + 1, failed_at = now(), last_error = \(error),
                recipient = NULL, subject = NULL, text_body = NULL
            WHERE id = \(id)
            """
        )
    }

    /// Deletes what is left of mails finished more than `retentionSeconds` ago; returns how many rows.
    func purgeFinished(olderThan retentionSeconds: Double, in database: PostgresClient) async throws -> Int {
        try await database.execute(
            """
            DELETE FROM mail_outbox
            WHERE COALESCE(sent_at, failed_at) < now() - make_interval(secs => \(retentionSeconds))
              AND (sent_at IS NOT NULL OR failed_at IS NOT NULL)
            """
        )
    }
}
