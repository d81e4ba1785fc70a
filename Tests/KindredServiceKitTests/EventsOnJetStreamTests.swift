import Foundation
import KindredNATS
import KindredPostgres
import KindredProto
@testable import KindredServiceKit
import KindredTestSupport
import Logging
import Synchronization
import Testing

/// The event bus on a real `nats-server -js`: the producer's relay publishes its outbox (``OutboxRelay`` with a
/// ``JetStreamEventBus``), consumers follow durable pull consumers (``JetStreamEventConsumer``) and apply through an
/// inbox, as the services do.
@Suite(.serialized) struct EventsOnJetStreamTests {
    /// A producer name of its own per test: the process's bus registry is per producer.
    private static func producerName() -> String {
        "js" + String((0..<8).map { _ in "abcdefghijklmnopqrstuvwxyz".randomElement()! })
    }

    /// What a test consumer saw, and the events it holds back (not acknowledged) a number of times, or every event
    /// while `holdAll` is set.
    final class Record: Sendable {
        let refuse: Mutex<[String: Int]>
        let holdAll = Mutex(false)
        let seen = Mutex<[String]>([])
        init(refuse: [String: Int] = [:]) { self.refuse = Mutex(refuse) }
    }

    /// A consumer applying through `database`'s inbox into its `effects` table.
    private static func follower(
        _ name: String, producer: String, database: PostgresClient, bus: JetStreamEventBus, record: Record = Record()
    ) -> JetStreamEventConsumer {
        let refuse = record
        let seen = record
        let inbox = EventInbox(database: database, logger: testLogger)
        return JetStreamEventConsumer(consumer: name, producers: [producer], bus: bus, logger: testLogger) {
            events, producer in
            seen.seen.withLock { $0 += events.map(\.eventId) }
            let held = events.filter { event in
                if refuse.holdAll.withLock({ $0 }) { return true }
                return refuse.refuse.withLock { refusals in
                    guard let left = refusals[event.eventId], left > 0 else { return false }
                    refusals[event.eventId] = left - 1
                    return true
                }
            }
            guard held.isEmpty else { return [] }
            return try await inbox.process(events, from: producer) { event, transaction in
                try await transaction.execute(
                    """
                    INSERT INTO effects (event_id, partition_key, sequence)
                    VALUES (\(event.eventId)::uuid, \(event.partitionKey), \(event.sequence))
                    """
                )
            }
        }
    }

    private struct Setup {
        let nats: NATSTestCluster
        let database: EventsDatabase
        let outbox: Outbox
        let relay: OutboxRelay
        let settings: EventBusSettings

        func append(partition: String) async throws -> Kindred.Common.V1.Event {
            try await self.database.producer.withTransaction { transaction in
                var event = Kindred.Common.V1.Event()
                event.userId = partition
                event.communityId = "dogs"
                event.payload = .userBlocked(.with { $0.blockedUserId = "someone" })
                return try await self.outbox.append(event, in: transaction)
            }
        }

        func bus(_ name: String) -> JetStreamEventBus {
            JetStreamEventBus(settings: self.settings, name: name, logger: testLogger)
        }

        func stop() async {
            await self.database.shutdown()
            self.nats.stop()
        }
    }

    private func setUp() async throws -> Setup {
        let nats = try await NATSTestCluster.start()
        let database = try await EventsDatabase.make()
        let producer = Self.producerName()
        let settings = EventBusSettings(natsServers: NATSServerAddress.parseList(nats.url)!)
        var configuration = database.relayConfiguration([])
        configuration.producer = producer
        let relay = OutboxRelay(
            configuration: configuration, bus: JetStreamEventBus(settings: settings, name: "relay", logger: testLogger),
            database: database.producer, logger: testLogger)
        try await relay.registerConsumers()
        return Setup(nats: nats, database: database, outbox: Outbox(producer: producer), relay: relay, settings: settings)
    }

    /// Concurrent writers on four partitions, two replicas of the consumer sharing its durable consumers: every
    /// event applied once, each partition in sequence order; the producer's wait for the consumer returns.
    @Test func everyEventOnceInOrderPerPartitionAcrossReplicas() async throws {
        let setup = try await self.setUp()
        let running = Task { await setup.relay.run() }
        let busA = setup.bus("sink-a")
        let busB = setup.bus("sink-b")
        let replicaA = Self.follower("sink", producer: setup.outbox.producer, database: setup.database.consumer, bus: busA)
        let replicaB = Self.follower("sink", producer: setup.outbox.producer, database: setup.database.consumer, bus: busB)
        let consumers = [Task { await replicaA.run() }, Task { await replicaB.run() }]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<6 {
                group.addTask {
                    for index in 0..<10 { _ = try await setup.append(partition: "user-\((writer + index) % 4)") }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await eventually { try await setup.database.effects().count == 60 })
        let effects = try await setup.database.effects()
        #expect(effects.count == 60 && inOrderExactlyOnce(effects))
        // The producer's wait: published, then acknowledged by the consumer's durable for the partition.
        _ = try await setup.append(partition: "user-1")
        #expect(
            try await setup.outbox.awaitDelivery(
                partition: "user-1", consumers: ["sink"], on: setup.database.producer, timeout: .seconds(30)))
        #expect(try await setup.database.effects().count == 61)
        // Nobody follows for "absent": its wait times out.
        #expect(
            !(try await setup.outbox.awaitDelivery(
                partition: "user-1", consumers: ["absent"], on: setup.database.producer, timeout: .milliseconds(500))))
        for task in consumers + [running] { task.cancel() }
        for task in consumers { await task.value }
        await running.value
        await busA.close()
        await busB.close()
        await setup.stop()
    }

    /// An event the consumer does not acknowledge comes again before anything after it in its partition; the
    /// stream keeps each event once although the relay may publish it twice; a consumer added later gets
    /// everything from the start of the stream.
    @Test func unacknowledgedEventsComeBackFirstAndALaterConsumerReplays() async throws {
        let setup = try await self.setUp()
        var appended: [Kindred.Common.V1.Event] = []
        for index in 0..<12 { appended.append(try await setup.append(partition: "user-\(index % 3)")) }
        let running = Task { await setup.relay.run() }
        let record = Record(refuse: [appended[4].eventId: 2, appended[7].eventId: 1])
        let bus = setup.bus("sink")
        let follower = Self.follower(
            "sink", producer: setup.outbox.producer, database: setup.database.consumer, bus: bus, record: record)
        let following = Task { await follower.run() }
        #expect(try await eventually { try await setup.database.effects().count == 12 })
        #expect(inOrderExactlyOnce(try await setup.database.effects()))
        #expect(record.seen.withLock { $0.count } == 15, "two refusals of one event and one of another: redelivered")
        let stream = try await bus.jetStream.streamInfo(EventBusLayout.stream(producer: setup.outbox.producer))
        #expect(stream.state.messages == 12)
        // Publish the same event again (a relay that died before recording the PubAck): dropped by the window.
        var again = appended[0]
        again.sequence = 1
        try await bus.publish(again)
        #expect(try await bus.jetStream.streamInfo(stream.config.name).state.messages == 12)

        // A new consumer ("late", its own inbox) starts at the beginning of the stream.
        let other = try await EventsDatabase.make()
        let lateBus = setup.bus("late")
        let late = Self.follower("late", producer: setup.outbox.producer, database: other.consumer, bus: lateBus)
        let lateRunning = Task { await late.run() }
        #expect(try await eventually { try await other.effects().count == 12 })
        #expect(inOrderExactlyOnce(try await other.effects()))
        for task in [following, lateRunning, running] { task.cancel() }
        await following.value
        await lateRunning.value
        await running.value
        await bus.close()
        await lateBus.close()
        await other.shutdown()
        await setup.stop()
    }

    /// The stream lost while the relay's cursors say its events were published (NATS lost its store; or the
    /// databases were restored to a point in time and the cluster started on empty streams): the relay finds another
    /// stream than the one it recorded and publishes its outbox again; the consumer applies each event once, in
    /// order: the events it had applied from the lost stream are dropped by its inbox, the ones published but not
    /// yet applied when the stream went are applied now.
    @Test func aLostStreamIsFilledAgainFromTheOutboxAndEveryEventAppliedOnce() async throws {
        let setup = try await self.setUp()
        let producer = setup.outbox.producer
        let stream = EventBusLayout.stream(producer: producer)
        let record = Record()
        let bus = setup.bus("sink")
        let follower = Self.follower(
            "sink", producer: producer, database: setup.database.consumer, bus: bus, record: record)
        let following = Task { await follower.run() }
        let relaying = Task { await setup.relay.run() }
        for index in 0..<6 { _ = try await setup.append(partition: "user-\(index % 3)") }
        #expect(try await eventually { try await setup.database.effects().count == 6 })
        // Three more, published (the relay's cursors say so) but held back by the consumer when the stream goes.
        record.holdAll.withLock { $0 = true }
        var held: [String] = []
        for index in 0..<3 { held.append(try await setup.append(partition: "user-\(index)").eventId) }
        #expect(try await eventually { record.seen.withLock { seen in held.allSatisfy(seen.contains) } })
        #expect(try await bus.jetStream.streamInfo(stream).state.messages == 9)
        let lost = try await bus.jetStream.streamInfo(stream).created
        try await bus.jetStream.deleteStream(stream)
        record.holdAll.withLock { $0 = false }

        #expect(try await eventually { try await setup.database.effects().count == 9 })
        let effects = try await setup.database.effects()
        #expect(effects.count == 9 && inOrderExactlyOnce(effects))
        #expect(Set(held).isSubset(of: effects.map(\.eventID)))
        // The new stream holds the whole outbox again (the first six too: the inbox dropped them).
        let now = try await bus.jetStream.streamInfo(stream)
        #expect(now.created != lost && now.state.messages == 9)
        // And the relay carries on: a new event is published once and the producer's wait for the consumer returns.
        _ = try await setup.append(partition: "user-1")
        #expect(
            try await setup.outbox.awaitDelivery(
                partition: "user-1", consumers: ["sink"], on: setup.database.producer, timeout: .seconds(30)))
        #expect(try await setup.database.effects().count == 10)
        #expect(try await bus.jetStream.streamInfo(stream).state.messages == 10)
        #expect(!(try await setup.relay.checkStream()), "the stream recorded now: nothing to publish again")
        for task in [following, relaying] { task.cancel() }
        await following.value
        await relaying.value
        await bus.close()
        await setup.stop()
    }

    /// A producer's wait on a busy partition: the consumer acknowledged the partition's events up to the stream
    /// sequence the wait is for, while a later event of the same partition is still unacknowledged and another
    /// partition published in between (so the partition's ack floor is below that sequence and it has pending
    /// messages). The wait is over for the first; not for the later one.
    @Test func aPartitionIsCaughtUpThroughASequenceWhileLaterEventsArePending() async throws {
        let setup = try await self.setUp()
        let producer = setup.outbox.producer
        let busy = "user-1"
        let partition = EventBusLayout.partition(of: busy)
        let other = (2...).lazy.map { "user-\($0)" }.first { EventBusLayout.partition(of: $0) != partition }!
        let record = Record()
        let bus = setup.bus("sink")
        let follower = Self.follower(
            "sink", producer: producer, database: setup.database.consumer, bus: bus, record: record)
        let following = Task { await follower.run() }
        let relaying = Task { await setup.relay.run() }
        _ = try await setup.append(partition: busy)
        #expect(try await eventually { try await setup.database.effects().count == 1 })
        _ = try await setup.append(partition: other)  // published after the busy partition's first event
        #expect(try await eventually { try await setup.database.effects().count == 2 })
        let stream = EventBusLayout.stream(producer: producer)
        let through = try await bus.jetStream.streamInfo(stream).state.lastSequence
        // The busy partition's next event, held back by the consumer (never acknowledged).
        record.holdAll.withLock { $0 = true }
        let later = try await setup.append(partition: busy)
        #expect(try await eventually { record.seen.withLock { $0.contains(later.eventId) } })
        let filter = EventBusLayout.filter(producer: producer, partition: partition)
        let laterSequence = try #require(
            try await bus.jetStream.firstSequence(stream: stream, from: through + 1, subject: filter))
        #expect(laterSequence > through)
        func acknowledged(by consumer: String, through sequence: UInt64) async -> Bool {
            await bus.acknowledged(consumer: consumer, producer: producer, partition: partition, through: sequence)
        }
        #expect(await acknowledged(by: "sink", through: through))
        #expect(!(await acknowledged(by: "sink", through: laterSequence)))
        #expect(!(await acknowledged(by: "absent", through: through)))
        for task in [following, relaying] { task.cancel() }
        await following.value
        await relaying.value
        await bus.close()
        await setup.stop()
    }
}
