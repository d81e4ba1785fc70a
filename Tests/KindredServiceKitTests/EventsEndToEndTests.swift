import Prometheus
import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import Testing

/// Events between two small services on one PostgreSQL: a producer (outbox + relay) and a consumer (gRPC
/// DeliverEvents + inbox), with real gRPC on 127.0.0.1.
@Suite struct EventsEndToEndTests {
    @Test func concurrentProducersAreDeliveredInOrderPerPartition() async throws {
        let database = try await EventsDatabase.make()
        let consumer = TestConsumer(name: "sink", database: database.consumer)
        let address = try await consumer.start()
        var configuration = database.relayConfiguration([address])
        configuration.maxBatch = 7  // many batches, each cutting partitions somewhere
        let relay = try await database.relay(configuration)
        let running = Task { await relay.run() }
        // 8 writers, 15 events each, on 4 partitions at once: appends to a partition serialize on its counter row.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    for index in 0..<15 { try await database.append(partition: "user-\((writer + index) % 4)") }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await eventually { try await database.effects().count == 120 })
        let effects = try await database.effects()
        #expect(inOrderExactlyOnce(effects))
        for partition in 0..<4 {
            let sequences = effects.filter { $0.partition == "user-\(partition)" }.map(\.sequence)
            #expect(sequences.count == 30 && sequences == Array(sequences[0]..<sequences[0] + 30))
        }
        // Every event counted once, or more when a call failed (timed out on a loaded machine) after the consumer
        // applied it: its redelivery counts again.
        let counted = try await eventually {
            let sink = relay.metrics.consumer("sink")
            return sink.delivered == 120 || (sink.delivered > 120 && sink.failures > 0)
        }
        let sink = relay.metrics.consumer("sink")
        #expect(counted, "delivered \(sink.delivered), failures \(sink.failures)")
        running.cancel()
        await running.value
        await consumer.stop()
        await database.shutdown()
    }

    @Test func notificationStartsDeliveryWithoutWaitingForThePoll() async throws {
        let database = try await EventsDatabase.make()
        let consumer = TestConsumer(name: "sink", database: database.consumer)
        var configuration = database.relayConfiguration([try await consumer.start()])
        configuration.pollInterval = .seconds(3600)
        let relay = try await database.relay(configuration)
        let running = Task { await relay.run() }
        // Once the relay LISTENs, the first event is delivered (by its first pass or the NOTIFY); after that only a
        // NOTIFY can start the delivery of the second: the poll is an hour away.
        #expect(try await eventually {
            try await database.producer.query(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'"
            ).scalar(Int64.self) == 1
        })
        try await database.append(partition: "user-1")
        #expect(try await eventually { try await database.effects().count == 1 })
        try await database.append(partition: "user-1")
        #expect(try await eventually { try await database.effects().count == 2 })
        running.cancel()
        await running.value
        await consumer.stop()
        await database.shutdown()
    }

    @Test func undeployedThenFailingConsumerGetsEverythingOnceItRecovers() async throws {
        let database = try await EventsDatabase.make()
        let consumer = TestConsumer(name: "sink", database: database.consumer)
        // Find a free port, then leave it closed: the consumer is "not deployed" yet.
        let address = try await consumer.start()
        await consumer.stop()
        let metrics = ServerMetrics(registry: PrometheusCollectorRegistry())
        let relay = try await database.relay(database.relayConfiguration([address]), metrics: metrics)
        let running = Task { await relay.run() }
        for index in 0..<10 { try await database.append(partition: "user-\(index % 3)") }
        #expect(try await eventually { relay.metrics.consumer("sink").failures >= 2 })
        #expect(try await eventually { relay.metrics.consumer("sink").pending == 10 })
        #expect(
            metrics.prometheusText().contains(
                "kindred_events_pending{producer=\"producer\",consumer=\"sink\"} 10.0"
            )
        )
        // Deployed, but failing: two calls answered UNAVAILABLE, and one effect throws once.
        let second = try await database.append(partition: "user-1")
        consumer.control.withLock {
            $0.failCalls = 2
            $0.failOnce = [second.eventId]
        }
        _ = try await consumer.start(port: address.port)
        #expect(try await eventually { try await database.effects().count == 11 })
        let effects = try await database.effects()
        #expect(inOrderExactlyOnce(effects))
        #expect(try await eventually { relay.metrics.consumer("sink").pending == 0 })
        running.cancel()
        await running.value
        await consumer.stop()
        await database.shutdown()
    }

    /// A consumer that answers again ends the backoff of every partition that failed while it was down: the
    /// first one delivered makes the others due, not the end of their own backoff (here 150 s or more).
    @Test func aConsumerThatAnswersAgainEndsItsOtherPartitionsBackoff() async throws {
        let database = try await EventsDatabase.make()
        let consumer = TestConsumer(name: "sink", database: database.consumer)
        let address = try await consumer.start()
        await consumer.stop()
        var configuration = database.relayConfiguration([address])
        configuration.backoff = RetryBackoff(initial: .seconds(300), maximum: .seconds(300))
        let relay = try await database.relay(configuration)
        let running = Task { await relay.run() }
        try await database.append(partition: "user-a")
        try await database.append(partition: "user-b")
        #expect(try await eventually {
            try await database.producer.query(
                """
                SELECT count(*) FROM events_cursors
                WHERE consumer = 'sink' AND attempts > 0 AND next_attempt_at > now() + interval '100 seconds'
                """
            ).scalar(Int64.self) == 2
        })
        _ = try await consumer.start(port: address.port)
        // user-a's backoff ends (as the earliest of many would), again until the relay's client has reconnected
        // and user-a is delivered; user-b's backoff has minutes to go.
        #expect(try await eventually(timeout: .seconds(60)) {
            try await database.producer.execute(
                """
                UPDATE events_cursors SET next_attempt_at = now()
                WHERE consumer = 'sink' AND partition_key = 'user-a' AND attempts > 0
                """
            )
            try await Task.sleep(for: .milliseconds(200))
            return try await database.effects().contains { $0.partition == "user-a" }
        })
        #expect(try await eventually(timeout: .seconds(60)) { try await database.effects().count == 2 })
        running.cancel()
        await running.value
        await consumer.stop()
        await database.shutdown()
    }

    @Test func lostAcknowledgementsRedeliverWithoutApplyingTwice() async throws {
        let database = try await EventsDatabase.make()
        let consumer = TestConsumer(name: "sink", database: database.consumer)
        consumer.control.withLock { $0.dropAcknowledgements = 2 }
        let relay = try await database.relay(database.relayConfiguration([try await consumer.start()]))
        for index in 0..<20 { try await database.append(partition: "user-\(index % 5)") }
        let running = Task { await relay.run() }
        #expect(try await eventually { relay.metrics.consumer("sink").delivered == 20 })
        let received = consumer.control.withLock { $0.received }
        #expect(received.count > 20, "the dropped acknowledgements must have caused redeliveries")
        let effects = try await database.effects()
        #expect(effects.count == 20 && inOrderExactlyOnce(effects))
        running.cancel()
        await running.value
        await consumer.stop()
        await database.shutdown()
    }

    @Test func relayKilledMidBatchLosesNothingAndAppliesNothingTwice() async throws {
        let database = try await EventsDatabase.make()
        let consumer = TestConsumer(name: "sink", database: database.consumer)
        // The batch stops after 5 effects (the rest wait until the call ends), however slowly the machine runs.
        consumer.control.withLock { $0.stallFrom = 5 }
        let address = try await consumer.start()
        let first = try await database.relay(database.relayConfiguration([address], lease: .seconds(2)))
        for index in 0..<40 { try await database.append(partition: "user-\(index % 4)") }
        // A relay that dies inside a batch: no acknowledgement recorded, its leases left behind. It delivers until
        // it is killed: on a busy machine its first call can reach its deadline (1 s) before 5 effects commit.
        let killed = Task {
            while !Task.isCancelled {
                _ = try? await first.deliverOnce(to: address)
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        #expect(try await eventually { try await database.effects().count >= 5 })
        killed.cancel()
        _ = await killed.result
        let appliedBeforeRestart = try await database.effects().count
        #expect(appliedBeforeRestart < 40)
        consumer.control.withLock { $0.stallFrom = nil }
        // A new relay takes over once the dead one's leases end (2 s in tests).
        let second = try await database.relay(database.relayConfiguration([address], lease: .seconds(2)))
        let running = Task { await second.run() }
        #expect(try await eventually { try await database.effects().count == 40 })
        // Nothing pending any more: a duplicate, had there been one, is in the table by now.
        #expect(try await eventually { second.metrics.consumer("sink").pending == 0 })
        let effects = try await database.effects()
        #expect(effects.count == 40 && inOrderExactlyOnce(effects))
        running.cancel()
        await running.value
        await consumer.stop()
        await database.shutdown()
    }

    /// A relay whose record of an answer failed (PostgreSQL restarting) records it before its next claim: the
    /// partitions it leased are delivered again at once, not when the lease (here 60 s) ends.
    @Test func anAnswerWhoseRecordFailedIsRecordedBeforeTheNextClaim() async throws {
        let database = try await EventsDatabase.make()
        let consumer = TestConsumer(name: "sink", database: database.consumer)
        let address = try await consumer.start()
        let relay = try await database.relay(database.relayConfiguration([address], lease: .seconds(60)))
        // While `records_fail` says so, a statement that ends a lease fails, as the record does with PostgreSQL gone.
        try await database.producer.execute("CREATE TABLE records_fail (failing boolean NOT NULL)")
        try await database.producer.execute("INSERT INTO records_fail VALUES (true)")
        try await database.producer.execute(
            """
            CREATE FUNCTION records_fail() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF OLD.leased_by IS NOT NULL AND NEW.leased_by IS NULL AND (SELECT failing FROM records_fail) THEN
                    RAISE EXCEPTION 'the record is lost';
                END IF;
                RETURN NEW;
            END $$
            """)
        try await database.producer.execute(
            "CREATE TRIGGER records_fail BEFORE UPDATE ON events_cursors FOR EACH ROW EXECUTE FUNCTION records_fail()")
        try await database.append(partition: "user-1")
        await #expect(throws: PostgresError.self) { try await relay.deliverOnce(to: address) }
        #expect(try await database.effects().count == 1)
        try await database.producer.execute("UPDATE records_fail SET failing = false")
        try await database.append(partition: "user-1")
        // One pass records the first answer (ending its lease), claims user-1 again and delivers its second event.
        #expect(try await relay.deliverOnce(to: address) == 1)
        let effects = try await database.effects()
        #expect(effects.count == 2 && inOrderExactlyOnce(effects))
        await consumer.stop()
        await database.shutdown()
    }

    @Test func twoReplicasShareTheOutboxWithoutBreakingAPartitionsOrder() async throws {
        let database = try await EventsDatabase.make()
        let consumer = TestConsumer(name: "sink", database: database.consumer)
        consumer.control.withLock { $0.delayPerEvent = .milliseconds(2) }
        let address = try await consumer.start()
        var configuration = database.relayConfiguration([address])
        configuration.maxBatch = 5
        configuration.partitionsPerClaim = 2
        let replicas = [try await database.relay(configuration), try await database.relay(configuration)]
        let running = replicas.map { relay in Task { await relay.run() } }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<4 {
                group.addTask {
                    for index in 0..<25 { try await database.append(partition: "user-\((writer * 25 + index) % 10)") }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await eventually { try await database.effects().count == 100 })
        let effects = try await database.effects()
        #expect(inOrderExactlyOnce(effects))
        let received = consumer.control.withLock { $0.received }
        #expect(received.count == 100, "no event is sent twice while both replicas are healthy")
        #expect(try await eventually { replicas.map { $0.metrics.consumer("sink").delivered }.reduce(0, +) == 100 })
        let delivered = replicas.map { $0.metrics.consumer("sink").delivered }
        #expect(delivered.allSatisfy { $0 > 0 }, "both replicas took part: \(delivered)")
        for task in running { task.cancel() }
        for task in running { await task.value }
        await consumer.stop()
        await database.shutdown()
    }

    @Test func purgeRemovesDeliveredPartitionsEntirelyAndKeepsPendingOnes() async throws {
        let database = try await EventsDatabase.make()
        let consumer = TestConsumer(name: "sink", database: database.consumer)
        let relay = try await database.relay(database.relayConfiguration([try await consumer.start()]))
        let running = Task { await relay.run() }
        let first = [try await database.append(partition: "gone"), try await database.append(partition: "gone")]
        #expect(try await eventually { relay.metrics.consumer("sink").delivered == 2 })
        // A consumer that nobody delivers to: "kept" stays pending for it, and nothing of it may be purged.
        try await database.producer.execute("INSERT INTO events_consumers (consumer) VALUES ('absent')")
        try await database.append(partition: "kept")
        #expect(try await eventually { relay.metrics.consumer("sink").delivered == 3 })
        try await database.producer.execute("UPDATE events_outbox SET created_at = now() - interval '8 days'")
        #expect(try await relay.purgeDelivered() == 2)
        func count(_ table: String, _ partition: String) async throws -> Int64 {
            try await database.producer.query(
                "SELECT count(*) FROM \(identifier: table) WHERE partition_key = \(partition)"
            ).scalar(Int64.self)
        }
        for table in ["events_outbox", "events_cursors", "events_partitions"] {
            #expect(try await count(table, "gone") == 0, "\(table)")
        }
        #expect(try await count("events_outbox", "kept") == 1)
        #expect(try await count("events_cursors", "kept") == 2)
        // The partition comes back: its sequences keep growing, and delivery goes on.
        let again = try await database.append(partition: "gone")
        #expect(again.sequence > first.map(\.sequence).max()!)
        #expect(try await eventually { relay.metrics.consumer("sink").delivered == 4 })
        #expect(inOrderExactlyOnce(try await database.effects()))
        running.cancel()
        await running.value
        await consumer.stop()
        await database.shutdown()
    }

    @Test func cancelledRelayStopsPromptlyAndFreesItsPartitions() async throws {
        let database = try await EventsDatabase.make()
        let consumer = TestConsumer(name: "sink", database: database.consumer)
        // Two effects, then the batch hangs (300 s) inside a call that would not time out for 10 minutes.
        consumer.control.withLock { $0.stallFrom = 2 }
        var configuration = database.relayConfiguration([try await consumer.start()], lease: .seconds(1200))
        configuration.callTimeout = .seconds(600)
        let relay = try await database.relay(configuration)
        for index in 0..<30 { try await database.append(partition: "user-\(index % 3)") }
        let running = Task { await relay.run() }
        #expect(try await eventually { try await database.effects().count >= 2 })
        let leased = try await database.producer.query(
            "SELECT count(*) FROM events_cursors WHERE leased_by IS NOT NULL"
        )
        #expect(try leased.scalar(Int64.self) > 0)
        running.cancel()
        await running.value
        // Promptly: it cut its call short rather than waiting for the hanging batch to end.
        #expect(consumer.control.withLock { $0.stallsWaitedOut } == 0)
        let stillLeased = try await database.producer.query(
            "SELECT count(*) FROM events_cursors WHERE leased_by IS NOT NULL"
        )
        #expect(try stillLeased.scalar(Int64.self) == 0)
        await consumer.stop()
        await database.shutdown()
    }

    @Test func unknownPayloadsAreAcknowledgedAndOtherServicesAreRefused() async throws {
        let database = try await EventsDatabase.make()
        let consumer = TestConsumer(name: "sink", database: database.consumer)
        let address = try await consumer.start()
        let client = GRPCClient(
            configuration: GRPCClientConfiguration(host: "127.0.0.1", port: address.port),
            logger: testLogger
        )
        var event = Kindred.Common.V1.Event()
        event.eventId = try UUIDv7.generate()
        event.producer = "producer"
        event.userId = "user-1"
        event.sequence = 1  // no payload: a type this consumer does not know
        var request = DeliverEventsMethod.Request()
        request.events = [event]
        let method = DeliverEventsMethod.method(for: address)
        func metadata(_ token: String) -> Metadata { ["authorization": .string("Bearer " + token)] }
        let response = try await client.unary(
            method,
            request,
            metadata: metadata(try TestIdentity.serviceToken("producer"))
        )
        #expect(response.acknowledgedEventIds == [event.eventId])
        #expect(try await database.effects().isEmpty)
        let refusals: [(String?, StatusCode)] = [
            (nil, .unauthenticated),
            (
                try TestIdentity.token(subject: "0190a000-0000-7000-8000-000000000001", roles: ["user", "admin"]),
                .permissionDenied
            ),
            (try TestIdentity.serviceToken("chat"), .permissionDenied),
        ]
        for (token, code) in refusals {
            await #expect {
                _ = try await client.unary(method, request, metadata: token.map(metadata) ?? [:])
            } throws: { ($0 as? RPCError)?.code == code }
        }
        await client.close()
        await consumer.stop()
        await database.shutdown()
    }
}
