import Foundation
import KindredNATS
import KindredProto
import Logging
import NIOConcurrencyHelpers

/// A process's connection to the JetStream event bus (``EventBusSettings``), shared by its producer relay, its
/// consumer loops and the producer's waits for its consumers (``Outbox/awaitDelivery(partition:consumers:on:timeout:interval:)``).
///
/// Streams and durable consumers are created by whichever side needs them first, with the same settings
/// (``streamConfiguration(producer:)``, ``consumerConfiguration(consumer:producer:partition:)``), so producers
/// and consumers start in any order.
public final class JetStreamEventBus: Sendable {
    /// The pseudo-consumer in the producer's `events_consumers` whose cursors say what was published: the relay
    /// delivers to it by publishing (``OutboxRelay``).
    public static let relayConsumer = "jetstream"

    public let settings: EventBusSettings
    public let client: NATSClient
    public let jetStream: JetStream
    private let logger: Logger
    private let prepared = NIOLockedValueBox<Set<String>>([])
    private let connection = NIOLockedValueBox<Task<Void, Never>?>(nil)

    public init(settings: EventBusSettings, name: String, logger: Logger) {
        precondition(settings.usesNATS, "the JetStream bus needs servers")
        self.settings = settings
        self.logger = logger
        self.client = NATSClient(servers: settings.natsServers, name: name, logger: logger)
        self.jetStream = JetStream(client: self.client, timeout: .seconds(5))
    }

    /// Returns once connected (at once when it is), trying every 0.1...2 s meanwhile; one connection attempt runs
    /// for all callers. Returns early if the task is cancelled.
    public func connected() async {
        let task = self.connection.withLockedValue { task -> Task<Void, Never> in
            if let task { return task }
            let started = Task { [client, logger] in
                var delay: Duration = .milliseconds(100)
                while !Task.isCancelled {
                    do {
                        try await client.connect()
                        return
                    } catch {
                        logger.warning("events bus: no NATS server answers yet", metadata: ["error": "\(error)"])
                        try? await Task.sleep(for: delay)
                        delay = min(delay * 2, .seconds(2))
                    }
                }
            }
            task = started
            return started
        }
        await withTaskCancellationHandler { await task.value } onCancel: {}
    }

    public func close() async {
        self.connection.withLockedValue { $0 }?.cancel()
        await self.client.close()
    }

    // MARK: Layout

    /// File storage, three replicas (fewer on a smaller cluster), a two-minute de-duplication window on the event
    /// id and seven days of events, so a consumer added later replays the last week.
    public func streamConfiguration(producer: String) -> JetStreamStreamConfiguration {
        var configuration = JetStreamStreamConfiguration(
            name: EventBusLayout.stream(producer: producer), subjects: [EventBusLayout.subjects(producer: producer)])
        configuration.replicas = min(3, self.settings.natsServers.count)
        configuration.duplicateWindow = 120 * 1_000_000_000
        configuration.maxAge = 7 * 86_400 * 1_000_000_000
        return configuration
    }

    /// Explicit acks, one message pending at most (order per partition across the consumer's replicas), redelivered
    /// until acknowledged, 30 s before an unacknowledged message goes to another puller.
    public func consumerConfiguration(consumer: String, producer: String, partition: Int) -> JetStreamConsumerConfiguration {
        var configuration = JetStreamConsumerConfiguration(
            durableName: EventBusLayout.durable(consumer: consumer, partition: partition),
            filterSubject: EventBusLayout.filter(producer: producer, partition: partition))
        configuration.maxAckPending = 1
        configuration.ackWait = 30 * 1_000_000_000
        configuration.maxDeliver = -1
        return configuration
    }

    /// Creates or updates the producer's stream (once per process unless it fails).
    public func ensureStream(producer: String) async throws {
        let key = "stream/" + producer
        guard !self.prepared.withLockedValue({ $0.contains(key) }) else { return }
        try await self.jetStream.createOrUpdateStream(self.streamConfiguration(producer: producer))
        self.prepared.withLockedValue { _ = $0.insert(key) }
    }

    /// The producer's stream as it is now (``StreamMark``); a stream that no longer exists (NATS lost its store while
    /// this process ran) is created again first, as the consumers would.
    func streamMark(producer: String) async throws -> StreamMark {
        let name = EventBusLayout.stream(producer: producer)
        let info: JetStreamStreamInfo
        do {
            info = try await self.jetStream.streamInfo(name)
        } catch let error as JetStreamAPIError where error.errorCode == JetStreamAPIError.streamNotFound {
            info = try await self.jetStream.createOrUpdateStream(self.streamConfiguration(producer: producer))
        }
        return StreamMark(created: info.created, lastSequence: Int64(clamping: info.state.lastSequence))
    }

    /// Deletes the producer's stream with its durable consumers and creates it again, empty; returns the new one. The
    /// consumers' loops create their durables again when theirs are gone, from the start of the stream.
    func renewStream(producer: String) async throws -> StreamMark {
        do {
            try await self.jetStream.deleteStream(EventBusLayout.stream(producer: producer))
        } catch let error as JetStreamAPIError where error.errorCode == JetStreamAPIError.streamNotFound {}
        return try await self.streamMark(producer: producer)
    }

    /// Creates or updates one durable consumer (and the stream it reads). A stream created before by this process
    /// and gone since (NATS lost its store) is created again.
    public func ensureConsumer(consumer: String, producer: String, partition: Int) async throws {
        try await self.ensureStream(producer: producer)
        do {
            try await self.jetStream.createOrUpdateConsumer(
                stream: EventBusLayout.stream(producer: producer),
                self.consumerConfiguration(consumer: consumer, producer: producer, partition: partition))
        } catch let error as JetStreamAPIError where error.errorCode == JetStreamAPIError.streamNotFound {
            self.prepared.withLockedValue { _ = $0.remove("stream/" + producer) }
            throw error
        }
    }

    // MARK: Publishing

    /// Publishes one event (its wire form, sequence set) and returns once the stream stored it, or knew its id.
    public func publish(_ event: Kindred.Common.V1.Event) async throws {
        guard let payload = event.payload else { throw OutboxError("an event needs a payload") }
        let subject = EventBusLayout.subject(
            producer: event.producer, partitionKey: event.partitionKey, eventType: payload.typeName)
        _ = try await self.jetStream.publish(subject, payload: try event.serializedBytes(), messageID: event.eventId)
    }

    // MARK: Waiting for consumers

    /// Whether each of `consumers` has acknowledged every event of `partitionKey`'s partition published so far
    /// (the caller first waited for the publication): everything of the partition up to the stream's last sequence
    /// when the wait began (``acknowledged(consumer:producer:partition:through:)``). A consumer whose durable does
    /// not exist yet (not deployed) is behind.
    func consumersCaughtUp(producer: String, partitionKey: String, consumers: [String], timeout: Duration, interval: Duration)
        async throws -> Bool
    {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        let stream = EventBusLayout.stream(producer: producer)
        let partition = EventBusLayout.partition(of: partitionKey)
        let last = try await self.jetStream.streamInfo(stream).state.lastSequence
        var waiting = consumers
        while true {
            var behind: [String] = []
            for consumer in waiting {
                let done = await self.acknowledged(
                    consumer: consumer, producer: producer, partition: partition, through: last)
                if !done { behind.append(consumer) }
            }
            if behind.isEmpty { return true }
            waiting = behind
            guard clock.now < deadline else { return false }
            try await Task.sleep(for: min(interval, clock.now.duration(to: deadline)))
        }
    }

    /// Whether `consumer`'s durable for `partition` has acknowledged every message of the partition up to stream
    /// sequence `last` (false when JetStream does not answer). The ack floor alone does not say: it stops at the
    /// partition's own last acknowledged message, below `last` whenever other partitions published after it, and a
    /// busy partition is rarely without pending messages; so the first message of the partition above the ack
    /// floor is looked up, and everything up to `last` is acknowledged when it comes after `last` (or there is none).
    func acknowledged(consumer: String, producer: String, partition: Int, through last: UInt64) async -> Bool {
        let stream = EventBusLayout.stream(producer: producer)
        do {
            let info = try await self.jetStream.consumerInfo(
                stream: stream, consumer: EventBusLayout.durable(consumer: consumer, partition: partition))
            let floor = info.ackFloor.streamSequence
            if floor >= last || (info.pending == 0 && info.ackPending == 0) { return true }
            let filter = EventBusLayout.filter(producer: producer, partition: partition)
            let next = try await self.jetStream.firstSequence(stream: stream, from: floor + 1, subject: filter)
            return next.map { $0 > last } ?? true
        } catch {
            return false
        }
    }

    // MARK: The process's buses

    private static let registry = NIOLockedValueBox<[String: JetStreamEventBus]>([:])

    /// The bus `producer`'s relay publishes on in this process, nil when it uses the PostgreSQL relay.
    public static func registered(producer: String) -> JetStreamEventBus? {
        self.registry.withLockedValue { $0[producer] }
    }

    static func register(_ bus: JetStreamEventBus?, producer: String) {
        self.registry.withLockedValue { $0[producer] = bus }
    }
}
