import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import Logging

/// The consumer side of events: turns a DeliverEvents batch into effects, each committed together with the
/// event's id, and answers which events are durably handled.
///
/// ```swift
/// func deliverEvents(_ request: DeliverEventsRequest, _ context: ServerContext) async throws
///     -> DeliverEventsResponse
/// {
///     let producer = try await self.access.requireService(["auth", "profile", "match"], context)
///     var response = DeliverEventsResponse()
///     response.acknowledgedEventIds = try await self.inbox.process(request.events, from: producer) { event in
///         switch event.payload {
///         case .accountDeleted?: { try await $0.execute("DELETE FROM profiles WHERE user_id = \(event.userId)") }
///         default: nil  // irrelevant here: acknowledged without a transaction
///         }
///     }
///     return response
/// }
/// ```
///
/// The rules of proto/kindred/common/v1/events.proto, kept here once:
/// - A batch has at most 100 events, all from the calling service (`from`): anything else is refused with
///   INVALID_ARGUMENT before any effect, so a service cannot pass events off as another's.
/// - Exactly-once effect: each event with an effect runs in its own transaction that first records `event_id` in
///   `events_inbox`; a redelivered event finds its id there, runs nothing and is acknowledged. An event without
///   one (a type this consumer does not apply) is acknowledged without touching the database.
/// - Order per partition: once an event of a partition fails, the later events of that partition in the
///   batch are neither applied nor acknowledged (they come again after it); other partitions go on.
/// - Events with a payload this build does not know (a newer producer) are acknowledged without effect.
/// - Ids are kept for `retention` (at least 7 days, the contract's minimum); ``purge()`` deletes older ones.
///
/// The table is in ``schemaSQL``; a consumer copies it into a numbered migration of its own.
public struct EventInbox: Sendable {
    /// The contract's minimum.
    public static let minimumRetention: Duration = .seconds(7 * 86_400)

    /// Applies one event inside the transaction that records it. Throw to leave it unacknowledged.
    public typealias Handler = @Sendable (Kindred.Common.V1.Event, PostgresTransaction) async throws -> Void
    /// One event's effect, run inside the transaction that records the event. Throw to leave it unacknowledged.
    public typealias Effect = @Sendable (PostgresTransaction) async throws -> Void

    let database: PostgresClient
    let logger: Logger
    public let retention: Duration

    /// - Parameter retention: how long processed ids are kept; at least ``minimumRetention``. Default 8 days.
    public init(database: PostgresClient, retention: Duration = .seconds(8 * 86_400), logger: Logger) {
        precondition(retention >= Self.minimumRetention, "event ids must be kept at least 7 days")
        self.database = database
        self.retention = retention
        self.logger = logger
    }

    /// Processes `events` from `producer` (the caller's service name, from ``ServiceAccess``) in order and
    /// returns the ids to acknowledge; `handler` runs for every event, in the transaction that records it.
    public func process(
        _ events: [Kindred.Common.V1.Event],
        from producer: String,
        handler: @escaping Handler
    ) async throws -> [String] {
        try await self.process(events, from: producer) { event in { try await handler(event, $0) } }
    }

    /// Processes `events` from `producer` in order and returns the ids to acknowledge. `effect` says, without the
    /// database, what an event does: nil for an event this consumer does not apply, which is acknowledged without a
    /// transaction (a redelivery has no effect either); otherwise the effect runs in the transaction that records
    /// the event. Deciding by the payload's case (and the producer) keeps the consumer's ``EventSubscriptions``
    /// entry checkable against it; checks of the content belong in the effect.
    ///
    /// ```swift
    /// func effect(of event: Kindred.Common.V1.Event) -> EventInbox.Effect? {
    ///     switch event.payload {
    ///     case .accountDeleted?: { try await self.profiles.erase(event.userId, in: $0) }
    ///     default: nil
    ///     }
    /// }
    /// ```
    public func process(
        _ events: [Kindred.Common.V1.Event],
        from producer: String,
        effect: (Kindred.Common.V1.Event) -> Effect?
    ) async throws -> [String] {
        guard events.count <= DeliveryPlan.maxBatch else {
            throw RPCError(.invalidArgument, "At most \(DeliveryPlan.maxBatch) events per call")
        }
        guard events.allSatisfy({ $0.producer == producer }) else {
            throw RPCError(.invalidArgument, "Events must come from their producer")
        }
        var decisions = InboxBatch()
        for event in events {
            guard self.screen(event, into: &decisions) else { continue }
            guard let apply = effect(event) else {
                decisions.acknowledge(event)
                continue
            }
            do {
                try await EventTracing.handling(event) {
                    try await self.database.withTransaction { transaction in
                        let recorded = try await transaction.execute(
                            """
                            INSERT INTO events_inbox (event_id, producer, partition_key, sequence)
                            VALUES (\(event.eventId)::uuid, \(event.producer), \(event.partitionKey), \(event.sequence))
                            ON CONFLICT (event_id) DO NOTHING
                            """
                        )
                        guard recorded == 1 else { return }  // processed before: no effect again
                        try await apply(transaction)
                    }
                }
                decisions.acknowledge(event)
            } catch {
                self.logger.warning(
                    "event not applied, will be redelivered",
                    metadata: [
                        "events.producer": "\(event.producer)", "events.id": "\(event.eventId)",
                        "error.type": "\(type(of: error))",
                    ]
                )
                decisions.fail(event)
            }
        }
        return decisions.acknowledged
    }

    /// What is decided about `event` of a batch without the database: false when it is not to be applied, because
    /// its partition already failed in the batch, its payload is one this build does not know (acknowledged), or
    /// its id is invalid (it cannot be recorded, so it can never be acknowledged: it holds its partition).
    func screen(_ event: Kindred.Common.V1.Event, into decisions: inout InboxBatch) -> Bool {
        guard decisions.shouldProcess(event) else { return false }
        guard event.payload != nil else {
            decisions.acknowledge(event)
            return false
        }
        guard UUIDv7.isValid(event.eventId) else {
            self.logger.error("event with an invalid id", metadata: ["events.producer": "\(event.producer)"])
            decisions.fail(event)
            return false
        }
        return true
    }

    /// Deletes ids older than `retention` (run it now and then, e.g. hourly); returns how many.
    @discardableResult
    public func purge() async throws -> Int {
        try await self.database.execute(
            "DELETE FROM events_inbox WHERE processed_at < now() - make_interval(secs => \(self.retention.seconds))"
        )
    }

    /// The consumer's table, to copy into a numbered migration (in the service's schema).
    public static let schemaSQL = """
        CREATE TABLE events_inbox (
            event_id      uuid PRIMARY KEY,
            producer      text NOT NULL,
            partition_key text NOT NULL,
            sequence      bigint NOT NULL,
            processed_at  timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX events_inbox_processed ON events_inbox (processed_at);
        """
}

/// What a consumer acknowledges of a batch, as a value: the contract's per-partition rule without I/O.
struct InboxBatch: Sendable, Hashable {
    private(set) var acknowledged: [String] = []
    private var failed = Set<String>()

    /// False for an event whose partition already failed in this batch (it must wait for redelivery).
    func shouldProcess(_ event: Kindred.Common.V1.Event) -> Bool {
        !self.failed.contains(Self.key(event))
    }

    mutating func acknowledge(_ event: Kindred.Common.V1.Event) {
        self.acknowledged.append(event.eventId)
    }

    mutating func fail(_ event: Kindred.Common.V1.Event) {
        self.failed.insert(Self.key(event))
    }

    /// Partitions are per producer.
    private static func key(_ event: Kindred.Common.V1.Event) -> String {
        event.producer + "\u{0}" + event.partitionKey
    }
}

extension Kindred.Common.V1.Event {
    /// The ordering partition: `user_id`, or `community_id` for community events.
    public var partitionKey: String { self.userId.isEmpty ? self.communityId : self.userId }
}
