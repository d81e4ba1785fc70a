import Prometheus
import Foundation
import KindredGRPC
import KindredIdentity
import KindredOpenSSL
import KindredPostgres
import KindredPostgresTesting
import KindredProto
import KindredServiceKit
import Logging
import Synchronization

let testLogger = Logger(label: "kindred.servicekit.test")

/// A signing key standing in for auth's: tokens for tests, and the verifier consumers use.
enum TestIdentity {
    static let keyID = "test-key"
    static let key = try! Ed25519PrivateKey()

    static func token(subject: String, roles: [String], lifetime: Int64 = 300) throws -> String {
        let claims = AccessTokenClaims(
            subject: subject,
            issuedAt: Int64(Date().timeIntervalSince1970),
            lifetimeSeconds: lifetime,
            tokenID: try UUIDv7.generate(),
            sessionID: nil,
            roles: roles
        )
        return try AccessTokenSigner(keyID: Self.keyID, key: Self.key).sign(claims)
    }

    static func serviceToken(_ service: String) throws -> String {
        try self.token(subject: "service:" + service, roles: ["service"])
    }

    static var authenticator: CallerAuthenticator { CallerAuthenticator(keys: [Self.keyID: Self.key.publicKey]) }

    /// What a producer's relay uses: tokens of `service`, signed locally.
    static func tokens(for service: String) -> ServiceTokenSource {
        ServiceTokenSource {
            (try serviceToken(service), (Int64(Date().timeIntervalSince1970) + 300) * 1000)
        }
    }
}

/// One private database with a producer schema (the outbox tables) and a consumer schema (the inbox and an
/// `effects` table the test consumer writes), each with its own client.
struct EventsDatabase {
    let producer: PostgresClient
    let consumer: PostgresClient
    let outbox = Outbox(producer: "producer")

    static func make() async throws -> EventsDatabase {
        let postgres = try await TestPostgres.shared()
        let base = try await postgres.createDatabase()
        func client(schema: String, sql: String) async throws -> PostgresClient {
            var configuration = base
            configuration.settings["search_path"] = schema
            var pool = PostgresClient.PoolConfiguration()
            pool.maxConnections = 10
            let client = PostgresClient(configuration: configuration, pool: pool, logger: testLogger)
            _ = try await PostgresMigrator(
                schema: schema,
                migrations: [PostgresMigration(version: 1, name: "events", sql: sql)]
            ).migrate(on: client, logger: testLogger)
            return client
        }
        let producer = try await client(schema: "producer", sql: Outbox.schemaSQL)
        let consumer = try await client(
            schema: "consumer",
            sql: EventInbox.schemaSQL + """

                CREATE TABLE effects (
                    id bigserial PRIMARY KEY, event_id uuid NOT NULL, partition_key text NOT NULL,
                    sequence bigint NOT NULL
                );
                """
        )
        return EventsDatabase(producer: producer, consumer: consumer)
    }

    func shutdown() async {
        await self.producer.shutdown()
        await self.consumer.shutdown()
    }

    /// Appends one event about `partition` in its own transaction. A lock wait past `lock_timeout` (appends to
    /// one partition queue on its counter row; a parallel test run on a loaded machine can hold a commit that
    /// long) rolled the transaction back, so it is tried again, as a service's caller would retry "busy".
    @discardableResult
    func append(
        partition: String,
        payload: Kindred.Common.V1.Event.Payload = .userBlocked(.with { $0.blockedUserId = "someone" })
    ) async throws -> Kindred.Common.V1.Event {
        var attempt = 0
        while true {
            do {
                return try await self.producer.withTransaction { transaction in
                    var event = Kindred.Common.V1.Event()
                    event.userId = partition
                    event.communityId = "dogs"
                    event.payload = payload
                    return try await self.outbox.append(event, in: transaction)
                }
            } catch let error as PostgresError where error.code == .lockTimeout && attempt < 5 {
                attempt += 1
            }
        }
    }

    /// The effects the consumer applied, in the order it applied them.
    func effects() async throws -> [(eventID: String, partition: String, sequence: Int64)] {
        try await self.consumer.query("SELECT event_id::text, partition_key, sequence FROM effects ORDER BY id").map {
            let (id, partition, sequence) = try $0.decode((String, String, Int64).self)
            return (id, partition, sequence)
        }
    }

    /// A relay configuration with short timings for tests. The call timeout leaves room for a loaded machine
    /// (a call that times out is redelivered, which some tests count); `lease` is what a relay that died
    /// costs its partitions.
    func relayConfiguration(_ consumers: [EventConsumer], lease: Duration = .seconds(10)) -> OutboxRelayConfiguration {
        var configuration = OutboxRelayConfiguration(producer: "producer", consumers: consumers)
        configuration.pollInterval = .milliseconds(100)
        configuration.lease = lease
        configuration.callTimeout = min(.seconds(5), lease / 2)
        configuration.backoff = RetryBackoff(initial: .milliseconds(20), maximum: .milliseconds(200))
        configuration.metricsInterval = .milliseconds(100)
        return configuration
    }

    /// A relay with its consumers registered (so that events appended from now on are pending for them).
    /// Its metrics go to `metrics` (a private registry unless given).
    func relay(
        _ configuration: OutboxRelayConfiguration,
        metrics: ServerMetrics = ServerMetrics(registry: PrometheusCollectorRegistry())
    ) async throws -> OutboxRelay {
        let relay = OutboxRelay(
            configuration: configuration,
            database: self.producer,
            tokens: TestIdentity.tokens(for: "producer"),
            metricsFactory: metrics.factory,
            logger: testLogger
        )
        try await relay.registerConsumers()
        return relay
    }
}

/// A small consumer service: DeliverEvents through an `EventInbox` that writes one `effects` row per event,
/// with knobs to make it fail.
final class TestConsumer: GRPCService, Sendable {
    struct Control {
        /// Calls answered UNAVAILABLE before anything is applied.
        var failCalls = 0
        /// Event ids whose effect throws once.
        var failOnce: Set<String> = []
        /// Calls whose acknowledgements are lost after the effects were committed.
        var dropAcknowledgements = 0
        /// Time each effect takes.
        var delayPerEvent: Duration = .zero
        /// Once this many effects are committed, the next ones wait (300 s, or until their call is cancelled)
        /// instead of being applied.
        var stallFrom: Int?
        /// Stalled effects that waited their whole 300 s (their call was not cancelled).
        var stallsWaitedOut = 0
        /// Every event id received, duplicates included, in arrival order.
        var received: [String] = []
    }

    let name: String
    let inbox: EventInbox
    let access = ServiceAccess(authenticator: TestIdentity.authenticator)
    let control = Mutex(Control())
    private let server = Mutex<GRPCServer?>(nil)

    init(name: String, database: PostgresClient) {
        self.name = name
        self.inbox = EventInbox(database: database, logger: testLogger)
    }

    func register(in router: inout GRPCRouter) {
        router.unary(DeliverEventsMethod.method(for: EventConsumer(name: self.name, host: "", port: 0))) {
            request,
            context in
            try await self.deliverEvents(request, context)
        }
    }

    private func deliverEvents(
        _ request: DeliverEventsMethod.Request,
        _ context: ServerContext
    ) async throws -> DeliverEventsMethod.Response {
        let producer = try await self.access.requireService(["producer"], context)
        let fail = self.control.withLock { control -> Bool in
            guard control.failCalls > 0 else { return false }
            control.failCalls -= 1
            return true
        }
        if fail { throw RPCError(.unavailable, "Consumer is failing on purpose") }
        self.control.withLock { $0.received += request.events.map(\.eventId) }
        let acknowledged = try await self.inbox.process(request.events, from: producer) { event, transaction in
            let (delay, failNow, stallFrom) = self.control.withLock { control in
                (control.delayPerEvent, control.failOnce.remove(event.eventId) != nil, control.stallFrom)
            }
            // Committed effects decide (an effect cut short by its call's deadline does not count).
            if let stallFrom,
                try await transaction.query("SELECT count(*) FROM effects").scalar(Int64.self) >= Int64(stallFrom)
            {
                try await Task.sleep(for: .seconds(300))
                self.control.withLock { $0.stallsWaitedOut += 1 }
                throw RPCError(.internalError, "stalled effect waited out")
            }
            if delay > .zero { try await Task.sleep(for: delay) }
            if failNow { throw RPCError(.internalError, "effect failed on purpose") }
            try await transaction.execute(
                """
                INSERT INTO effects (event_id, partition_key, sequence)
                VALUES (\(event.eventId)::uuid, \(event.partitionKey), \(event.sequence))
                """
            )
        }
        let drop = self.control.withLock { control -> Bool in
            guard control.dropAcknowledgements > 0 else { return false }
            control.dropAcknowledgements -= 1
            return true
        }
        var response = DeliverEventsMethod.Response()
        response.acknowledgedEventIds = drop ? [] : acknowledged
        return response
    }

    /// Starts serving on 127.0.0.1 (`port` 0: any free port); returns the consumer's address for a relay.
    func start(port: Int = 0) async throws -> EventConsumer {
        var configuration = GRPCServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = port
        let server = GRPCServer(configuration: configuration, services: [self], logger: testLogger)
        let address = try await server.start()
        self.server.withLock { $0 = server }
        return EventConsumer(name: self.name, host: "127.0.0.1", port: address.port ?? 0)
    }

    func stop() async {
        if let server = self.server.withLock({ $0 }) { await server.shutdown(grace: .milliseconds(200)) }
    }
}

/// Waits until `condition` holds, checking every 20 ms, at most `timeout` (generous: the machine running the
/// tests may be busy building; a healthy run takes far less).
func eventually(
    timeout: Duration = .seconds(120),
    _ condition: () async throws -> Bool
) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}

/// Whether every partition's effects came in strictly increasing sequence order, each event once.
func inOrderExactlyOnce(_ effects: [(eventID: String, partition: String, sequence: Int64)]) -> Bool {
    var last: [String: Int64] = [:]
    for effect in effects {
        guard effect.sequence > last[effect.partition, default: 0] else { return false }
        last[effect.partition] = effect.sequence
    }
    return Set(effects.map(\.eventID)).count == effects.count
}
