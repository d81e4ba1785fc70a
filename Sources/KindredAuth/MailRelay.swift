import Foundation
import KindredPostgres
import KindredSMTP
import Logging

/// Sends `mail_outbox` rows through SMTP. Rows are claimed with `FOR UPDATE SKIP LOCKED` (several instances
/// can run), marked sent only after the SMTP server accepted the message, and retried with exponential
/// backoff on transient failures. The Message-ID derives from the row id, so a crash between the server's
/// acceptance and the commit re-sends an identical mail at worst, and never loses one.
///
/// Once a row has its outcome (accepted, or failed for good) its address, subject and body (the link or code)
/// are erased in the same UPDATE; what remains (address hash, template, timestamps, outcome) is deleted after
/// `mailRetention` by a purge that runs at start and every hour.
public final class MailRelay: Sendable {
    private let database: PostgresClient
    private let outbox = MailOutboxStore()
    private let smtp: SMTPClient
    private let configuration: AuthConfiguration
    private let logger: Logger
    private let wakeups: AsyncStream<Void>
    private let wakeupContinuation: AsyncStream<Void>.Continuation

    public init(database: PostgresClient, smtp: SMTPClient, configuration: AuthConfiguration, logger: Logger) {
        self.database = database
        self.smtp = smtp
        self.configuration = configuration
        self.logger = logger
        (self.wakeups, self.wakeupContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Asks the relay to look for work now (called after a transaction queued mail).
    public func nudge() { self.wakeupContinuation.yield() }

    /// Runs until the task is cancelled.
    public func run() async {
        let interval = self.configuration.mailPollInterval
        await withTaskGroup(of: Void.self) { group in
            // A ticker turns the poll interval into wake-ups, so one loop handles both.
            group.addTask { [wakeupContinuation] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    wakeupContinuation.yield()
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    do {
                        try await self.purgeFinished()
                    } catch {
                        self.logger.warning("mail purge failed", metadata: ["error.type": "\(type(of: error))"])
                    }
                    try? await Task.sleep(for: .seconds(3600))
                }
            }
            group.addTask {
                for await _ in self.wakeups {
                    if Task.isCancelled { break }
                    while !Task.isCancelled, (try? await self.sendBatch()) ?? 0 > 0 {}
                }
            }
            await withTaskCancellationHandler {
                await group.next()
            } onCancel: {
                self.wakeupContinuation.finish()
            }
            group.cancelAll()
        }
    }

    /// Deletes what is left of mails finished more than `mailRetention` ago; returns how many rows.
    @discardableResult
    public func purgeFinished() async throws -> Int {
        try await self.outbox.purgeFinished(olderThan: Double(self.configuration.mailRetention), in: self.database)
    }

    /// Sends up to 10 due messages; returns how many rows it handled.
    ///
    /// Rows are claimed in a short transaction (`FOR UPDATE SKIP LOCKED`, then leased for `leaseSeconds` by moving
    /// `next_attempt_at`), sent over one SMTP connection with no transaction open, then marked. A crash after
    /// the server accepted a message leaves the row leased but unsent: it is sent again, identical (same
    /// Message-ID), once the lease ends.
    @discardableResult
    public func sendBatch() async throws -> Int {
        let claimed: [ClaimedMail]
        do {
            claimed = try await self.outbox.claimDue(limit: 10, leaseSeconds: 120, in: self.database)
        } catch {
            self.logger.warning("mail relay could not claim mail", metadata: ["error.type": "\(type(of: error))"])
            throw error
        }
        guard !claimed.isEmpty else { return 0 }
        let messages = claimed.map { mail in
            SMTPMessage(
                from: .init(self.configuration.mailFrom, displayName: "Kindred"),
                to: [.init(mail.recipient)],
                subject: mail.subject,
                textBody: mail.body,
                messageID: "auth-outbox-\(mail.id)@kindred.invalid",
                date: Date(timeIntervalSince1970: Double(mail.createdAt.millisecondsSinceEpoch) / 1000)
            )
        }
        let results = await self.smtp.send(messages)
        for (row, result) in zip(claimed, results) {
            switch result {
            case .success:
                try await self.outbox.markSent(id: row.id, in: self.database)
                self.logger.debug("mail sent", metadata: ["mail.outbox_id": "\(row.id)"])
            case .failure(let error)
            where error.isTransient && Int(row.attempts) + 1 < self.configuration.mailMaxAttempts:
                // 2 s, 4 s, 8 s … at most 1 h.
                let delay = min(Int64(1) << min(Int64(row.attempts) + 1, 12), 3600)
                try await self.outbox.scheduleRetry(
                    id: row.id,
                    error: error.code.description,
                    delaySeconds: delay,
                    in: self.database
                )
                self.logger.warning(
                    "mail send failed, will retry",
                    metadata: ["mail.outbox_id": "\(row.id)", "smtp.code": "\(error.code)"]
                )
            case .failure(let error):
                try await self.outbox.markFailed(id: row.id, error: error.code.description, in: self.database)
                self.logger.error(
                    "mail send failed permanently",
                    metadata: ["mail.outbox_id": "\(row.id)", "smtp.code": "\(error.code)"]
                )
            }
        }
        return claimed.count
    }
}
