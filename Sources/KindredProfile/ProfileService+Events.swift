import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import NIOConcurrencyHelpers

extension ProfileService {
    /// DeliverEvents: auth's account events and match's block events (service tokens of auth and match only).
    /// - AccountDeactivated / AccountReactivated: hide / show the profile (data kept); ProfileUpdated tells
    ///   discovery the eligibility changed.
    /// - AccountDeleted: erase the profile, attributes, location, photos (rows, and their bytes in whichever store
    ///   after the commit), account state and blocks; auth's also erases the user's events from profile's outbox
    ///   and re-announces the deletion to profile's consumers (``Outbox/eraseUser(_:community:in:)``).
    /// - UserBlocked / UserUnblocked, MatchCreated / MatchEnded: the `blocks`, `matched_pairs` and `ended_pairs`
    ///   tables card visibility asks (`RelationTables`).
    func deliverEvents(_ request: Kindred.Common.V1.DeliverEventsRequest, _ context: ServerContext) async throws
        -> Kindred.Common.V1.DeliverEventsResponse
    {
        try await EventInbox.deliver(request, from: Self.eventProducers, access: self.access, context) {
            try await self.applyEvents($0, from: $1)
        }
    }

    /// The producers whose events profile applies (``EventSubscriptions``).
    static let eventProducers = EventSubscriptions.producers(of: "profile") ?? []

    /// Applies `producer`'s events (from `DeliverEvents` or the JetStream bus); returns the ids to acknowledge.
    func applyEvents(_ events: [Kindred.Common.V1.Event], from producer: String) async throws -> [String] {
        let erased = ErasedKeys()
        let acknowledged = try await self.inbox.process(events, from: producer) {
            self.effect(of: $0, erased: erased)
        }
        let candidates = erased.keys
        if !candidates.isEmpty {
            do {
                // Only keys no row references now: an erasure that rolled back keeps its bytes.
                let keys = try await self.database.withTransaction { try await PhotoStore.unreferenced(candidates, in: $0) }
                try await self.blobs.delete(keys: keys)
            } catch {
                // The rows are gone; the bytes are unreachable. Logged for the operator (no user data in the line).
                self.logger.error("photo bytes of an erased account not deleted", metadata: ["error.type": "\(type(of: error))"])
            }
        }
        return acknowledged
    }

    /// One event's effect, in the inbox's transaction, decided by its type and producer (the kit's
    /// ``EventSubscriptions`` entry for profile lists the same); nil for an event profile does not apply. An erasure
    /// adds the photo keys it left to `erased`.
    func effect(of event: Kindred.Common.V1.Event, erased: ErasedKeys = ErasedKeys()) -> EventInbox.Effect? {
        switch (event.payload, event.producer) {
        case (.accountDeactivated?, "auth"):
            return { transaction in try await self.setDeactivated(event.userId, true, in: transaction) }
        case (.accountReactivated?, "auth"):
            return { transaction in try await self.setDeactivated(event.userId, false, in: transaction) }
        case (.accountDeleted?, "auth"):
            return { transaction in
                erased.add(try await self.profiles.erase(event.userId, in: transaction))
                // The snapshots still in profile's outbox go too; consumers get profile's own erasure after them.
                try await Self.outbox.eraseUser(event.userId, community: event.communityId, in: transaction)
            }
        case (.accountDeleted?, "match"):
            // Match's re-announcement (after a block it sent just before the deletion): erase again.
            return { transaction in erased.add(try await self.profiles.erase(event.userId, in: transaction)) }
        case (.userBlocked(let block)?, "match"):
            return { transaction in
                try await self.profiles.setBlocked(
                    blocker: event.userId, blocked: block.blockedUserId, true, in: transaction)
            }
        case (.userUnblocked(let block)?, "match"):
            return { transaction in
                try await self.profiles.setBlocked(
                    blocker: event.userId, blocked: block.unblockedUserId, false, in: transaction)
            }
        case (.matchCreated(let match)?, "match"):
            return { transaction in try await self.profiles.recordMatch(match.matchId, match.userIds, in: transaction) }
        case (.matchEnded(let match)?, "match"):
            return { transaction in try await self.profiles.endMatch(match.matchId, match.userIds, in: transaction) }
        default:
            return nil  // not for profile: acknowledged without a transaction
        }
    }

    private func setDeactivated(_ userID: String, _ deactivated: Bool, in transaction: PostgresTransaction) async throws {
        try await self.profiles.setDeactivated(userID, deactivated, in: transaction)
        guard var record = try await self.lockedRecord(userID, in: transaction) else { return }
        let settings = try await self.settings(of: record.communityID, in: transaction)
        record.version = try await self.profiles.touch(userID: userID, card: false, in: transaction)
        record = try await self.reread(userID, in: transaction)
        try await self.appendProfileUpdated(record, settings: settings, changed: ["eligible"], in: transaction)
    }
}

/// The blob keys erased accounts left behind in one DeliverEvents call (deleted after the inbox committed).
final class ErasedKeys: Sendable {
    private let box = NIOLockedValueBox<[String]>([])
    func add(_ keys: [String]) { self.box.withLockedValue { $0 += keys } }
    var keys: [String] { self.box.withLockedValue { $0 } }
}
