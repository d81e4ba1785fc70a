import Foundation
import KindredGRPCServices
import KindredNATS
import KindredProto
import Logging

/// A consumer service's side of the JetStream bus: for each producer it follows and each partition, a loop pulls
/// the next event from the durable consumer `<consumer>-<partition>` (shared with the service's other replicas),
/// hands it to `apply` — the same function the service's `DeliverEvents` calls, which commits the event's effect
/// with its inbox row — and acknowledges it only when `apply` acknowledged it (so after the commit). An event not
/// acknowledged is asked for again after a backoff (`-NAK` with a delay), before anything after it in its
/// partition; a replica that dies holding one lets it go to another after the ack wait (30 s).
///
/// Messages that are not an event of the stream's producer (a bug or a stranger on the bus) are logged and
/// acknowledged: they can never be applied, and holding them would stop their partition.
public final class JetStreamEventConsumer: Sendable {
    /// Applies events of `producer` and returns the ids it acknowledges (``EventInbox/process(_:from:handler:)``'s
    /// contract).
    public typealias Apply = @Sendable ([Kindred.Common.V1.Event], _ producer: String) async throws -> [String]

    public let consumer: String
    public let producers: [String]
    private let bus: JetStreamEventBus
    private let apply: Apply
    private let logger: Logger
    private let backoff = RetryBackoff(initial: .milliseconds(200), maximum: .seconds(30))
    /// How long one pull waits for a message.
    private static let pullExpiry: Duration = .seconds(5)

    public init(consumer: String, producers: [String], bus: JetStreamEventBus, logger: Logger, apply: @escaping Apply) {
        self.consumer = consumer
        self.producers = producers
        self.bus = bus
        self.logger = logger
        self.apply = apply
    }

    /// Pulls and applies until the task is cancelled.
    public func run() async {
        await self.bus.connected()
        await withTaskGroup(of: Void.self) { group in
            for producer in self.producers {
                for partition in 0..<EventBusLayout.partitions {
                    group.addTask { await self.follow(producer: producer, partition: partition) }
                }
            }
        }
    }

    /// One partition's loop.
    private func follow(producer: String, partition: Int) async {
        let stream = EventBusLayout.stream(producer: producer)
        let durable = EventBusLayout.durable(consumer: self.consumer, partition: partition)
        var failures = 0
        var prepared = false
        while !Task.isCancelled {
            do {
                if !prepared {
                    try await self.bus.ensureConsumer(consumer: self.consumer, producer: producer, partition: partition)
                    prepared = true
                }
                let pulled = ContinuousClock.now
                guard
                    let message = try await self.bus.jetStream.fetch(
                        stream: stream, consumer: durable, batch: 1, expires: Self.pullExpiry
                    ).first
                else {
                    // The server ends an empty pull with a status when it expires; silence past that means nobody
                    // took the pull: the durable or its stream is gone (NATS lost its store, or the producer's relay
                    // renewed a stream that went back). Asking for the durable says which (and creates it again).
                    if ContinuousClock.now - pulled > Self.pullExpiry + .seconds(1) {
                        _ = try await self.bus.jetStream.consumerInfo(stream: stream, consumer: durable)
                    }
                    continue
                }
                if try await self.handle(message, producer: producer, failures: failures) {
                    failures = 0
                } else {
                    failures += 1
                }
            } catch {
                if Task.isCancelled { return }
                failures += 1
                if failures == 1 || failures % 50 == 0 {
                    self.logger.warning(
                        "events bus: pulling failed, will retry",
                        metadata: ["events.producer": "\(producer)", "events.durable": "\(durable)", "error": "\(error)"])
                }
                if let error = error as? JetStreamAPIError, error.errorCode == JetStreamAPIError.consumerNotFound
                    || error.errorCode == JetStreamAPIError.streamNotFound
                {
                    prepared = false
                }
                try? await Task.sleep(for: self.backoff.delay(afterFailures: min(failures, 5)))
            }
        }
    }

    /// Applies one message; true when it was acknowledged.
    private func handle(_ message: JetStreamMessage, producer: String, failures: Int) async throws -> Bool {
        guard let event = try? Kindred.Common.V1.Event(serializedBytes: message.payload), event.producer == producer
        else {
            self.logger.error(
                "events bus: a message that is not an event of its stream's producer, dropped",
                metadata: ["events.producer": "\(producer)", "nats.subject": "\(message.subject)"])
            try await self.bus.jetStream.ack(message)
            return true
        }
        let acknowledged: [String]
        do {
            acknowledged = try await self.apply([event], producer)
        } catch {
            acknowledged = []
        }
        if acknowledged.contains(event.eventId) {
            try await self.bus.jetStream.ack(message)
            return true
        }
        self.logger.log(
            level: failures == 0 ? .warning : .debug,
            "events bus: event not applied, will be redelivered",
            metadata: ["events.producer": "\(producer)", "events.id": "\(event.eventId)"])
        try await self.bus.jetStream.nak(message, delay: self.backoff.delay(afterFailures: failures + 1))
        return false
    }
}

extension JetStreamEventConsumer {
    /// The server's background task that follows `producers` on the bus for `consumer`, or nil when `settings`
    /// name no NATS servers (events then come through `DeliverEvents`).
    public static func backgroundTask(
        consumer: String,
        producers: Set<String>,
        settings: EventBusSettings,
        logger: Logger,
        apply: @escaping Apply
    ) -> BackgroundTask? {
        guard settings.usesNATS else { return nil }
        let bus = JetStreamEventBus(settings: settings, name: consumer + "-events", logger: logger)
        let follower = JetStreamEventConsumer(
            consumer: consumer, producers: producers.sorted(), bus: bus, logger: logger, apply: apply)
        return BackgroundTask("events-bus") {
            await follower.run()
            await bus.close()
        }
    }
}
