import KindredPostgres
import KindredProto
import KindredServiceKit

extension NotifyService {
    /// How likes received become digests.
    var likesDigest: LikesDigest { LikesDigest(interval: self.configuration.likesDigestInterval) }

    /// A like (match's SwipeRecorded with LIKE): counted in the liked member's waiting digest, or a new digest due
    /// when ``LikesDigest`` says. The liker is kept only until the digest is sent and never shown: the digest says
    /// how many, not who. A pass, and a like between members who blocked each other (either way, the block applied
    /// first), say nothing.
    func countLike(
        _ swipe: Kindred.Common.V1.SwipeRecorded, by liker: String, holding held: EventBatchLocks,
        in transaction: PostgresTransaction
    ) async throws {
        guard swipe.action == .like else { return }
        let liked = swipe.targetUserId.lowercased()
        guard UUIDv7.isValid(liker), UUIDv7.isValid(liked), liker != liked else { return }
        let preferences = try await self.settings.preferences(of: liked, in: transaction)
        guard NotificationKind.likes.isWanted(by: preferences) else { return }
        if !held.holds(pair: liker, liked) { try await self.blocks.lock(between: liker, and: liked, in: transaction) }
        guard try await !self.blocks.isBlocked(between: liker, and: liked, in: transaction) else { return }
        if !held.holds(digestOf: liked) { try await self.digests.lock(digestOf: liked, in: transaction) }
        let waiting = try await self.notifications.waiting(
            .likes, to: liked, collapseKey: LikesDigest.collapseKey, in: transaction)
        let last = try await self.notifications.lastDigest(of: liked, in: transaction)
        switch self.likesDigest.action(
            waiting: waiting, nowUnixMs: PostgresTimestamp.now.millisecondsSinceEpoch,
            lastSentUnixMs: last?.millisecondsSinceEpoch)
        {
        case .join(let digest):
            try await self.digests.add(liker: liker, to: liked, digest: digest, in: transaction)
        case .queue(let due):
            let digest = try UUIDv7.generate()
            try await self.notifications.enqueueDigest(
                id: digest, to: liked, due: PostgresTimestamp(millisecondsSinceEpoch: due), in: transaction)
            try await self.digests.add(liker: liker, to: liked, digest: digest, in: transaction)
        }
    }

    /// A report resolved (match's ReportResolved): the reporter is told it was reviewed — not the decision, not
    /// the member — once per report.
    func queueReportOutcome(
        _ resolved: Kindred.Common.V1.ReportResolved, reporter: String, in transaction: PostgresTransaction
    ) async throws {
        let report = resolved.reportId.lowercased()
        guard UUIDv7.isValid(reporter), UUIDv7.isValid(report) else { return }
        let preferences = try await self.settings.preferences(of: reporter, in: transaction)
        guard NotificationKind.reportOutcome.isWanted(by: preferences) else { return }
        try await self.notifications.enqueue(
            id: try UUIDv7.generate(), to: reporter, kind: .reportOutcome, about: nil, source: report, collapseKey: nil,
            in: transaction)
    }
}
