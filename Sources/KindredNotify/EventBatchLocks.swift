import KindredPostgres
import KindredProto
import KindredServiceKit

/// The advisory locks the events of one `DeliverEvents` batch will take, taken before the first of them in one order
/// for every batch (``NotifyService/applyEvents(_:from:)``): a batch is one transaction, so it holds each lock until
/// its commit, and two batches applied at once (several relay loops per producer, several producers) would otherwise
/// take the same two locks in opposite orders and wait on each other until PostgreSQL's deadlock check broke the
/// cycle (after a second, the event redelivered). A handler takes a lock it needs only when the batch does not hold
/// it already (one statement less each).
///
/// In order: the members the events name, shared (``DeletedMemberStore``: an account deletion takes its member's
/// exclusively, in its own handler, and is left out here), then the pair locks (``BlockStore``) of the events about
/// a pair, then the likes-digest locks (``DigestStore``) of liked members, then the activity locks
/// (``ActivityNotificationStore``) of broadcasters and of blocks' members; each list sorted. Pure: tested in
/// `EventBatchLocksTests`.
struct EventBatchLocks: Sendable, Hashable {
    /// Sorted, each list.
    var members: [String] = []
    var pairs: [String] = []
    var digests: [String] = []
    /// Broadcasters of activities and both members of blocks (``ActivityNotificationStore``), exclusive.
    var activities: [String] = []

    init(_ events: [Kindred.Common.V1.Event]) {
        var (members, pairs, digests, activities) = (Set<String>(), Set<String>(), Set<String>(), Set<String>())
        for event in events {
            let subject = event.userId.lowercased()
            var pair: (String, String)?
            switch event.payload {
            case nil, .accountDeleted?: continue
            case .messageSent(let message)?: pair = (subject, message.recipientUserId.lowercased())
            case .matchCreated(let match)? where match.userIds.count == 2:
                pair = (match.userIds[0].lowercased(), match.userIds[1].lowercased())
            case .userBlocked(let blocked)?: pair = (subject, blocked.blockedUserId.lowercased())
            case .activityStarted? where UUIDv7.isValid(subject): activities.insert(subject)
            case .userUnblocked(let unblocked)?: pair = (subject, unblocked.unblockedUserId.lowercased())
            case .swipeRecorded(let swipe)? where swipe.action == .like:
                pair = (subject, swipe.targetUserId.lowercased())
            default: break
            }
            members.formUnion(NotifyService.members(namedBy: event))
            if let (first, second) = pair, first != second, UUIDv7.isValid(first), UUIDv7.isValid(second) {
                pairs.insert(BlockStore.pair(first, second))
                if case .swipeRecorded? = event.payload { digests.insert(second) }
                if case .userBlocked? = event.payload { activities.formUnion([first, second]) }
            }
        }
        (self.members, self.pairs, self.digests, self.activities) = (
            members.sorted(), pairs.sorted(), digests.sorted(), activities.sorted()
        )
    }

    /// Whether the batch holds the pair lock of `first` and `second` already.
    func holds(pair first: String, _ second: String) -> Bool { self.pairs.contains(BlockStore.pair(first, second)) }

    /// Whether the batch holds the member locks (shared) of all of `members` already.
    func holds(members: [String]) -> Bool { members.allSatisfy(self.members.contains) }

    /// Whether the batch holds `member`'s likes-digest lock already.
    func holds(digestOf member: String) -> Bool { self.digests.contains(member) }

    /// Whether the batch holds `member`'s activity lock already.
    func holds(activitiesOf member: String) -> Bool { self.activities.contains(member) }

    /// Takes them all, in their order, in `transaction`: four statements at most, one per kind of lock.
    func take(in transaction: PostgresTransaction, of service: NotifyService) async throws {
        try await service.deletedMembers.lockShared(self.members, in: transaction)
        try await service.blocks.lock(pairs: self.pairs, in: transaction)
        try await service.digests.lock(digestsOf: self.digests, in: transaction)
        try await service.activityNotifications.lock(activitiesOf: self.activities, in: transaction)
    }
}
