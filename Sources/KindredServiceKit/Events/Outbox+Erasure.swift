import KindredPostgres
import KindredProto

extension Outbox {
    /// A deleted account's part of this producer's outbox, in the transaction that erases the account's data here
    /// (on auth's AccountDeleted): the events of the user's partition go, delivered or not (profile snapshots,
    /// swipes, blocks: nothing of them may outlive the account by the outbox's retention), and one
    /// AccountDeleted from this producer takes their place at the end of the partition.
    ///
    /// The re-announcement closes the race with events already on their way: a consumer may apply auth's
    /// AccountDeleted before this producer's last events about the user (a snapshot, a swipe sent just before
    /// the deletion) and re-create rows from them; per-partition order makes this AccountDeleted arrive after
    /// any such event, so every consumer's last word about the user from this producer is an erasure.
    /// Consumers treat it as auth's (idempotent erase); producers re-announce only auth's, so two producers
    /// never echo each other. The notice carries the user id only and is purged after delivery like any event.
    public func eraseUser(_ userID: String, community: String, in transaction: PostgresTransaction) async throws {
        guard !userID.isEmpty else { throw OutboxError("an erasure needs a user_id") }
        try await transaction.execute("DELETE FROM events_outbox WHERE partition_key = \(userID)")
        var notice = Kindred.Common.V1.Event()
        notice.userId = userID
        notice.communityId = community
        notice.payload = .accountDeleted(.init())
        try await self.append(notice, in: transaction)
    }
}
