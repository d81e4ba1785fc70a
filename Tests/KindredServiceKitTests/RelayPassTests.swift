import Foundation
import KindredPostgres
import KindredProto
import Testing

@testable import KindredServiceKit

/// A delivery loop runs pass after pass while a pass says more may be due, and stops (until the next wake-up)
/// after one that shows nothing is left, instead of claiming once more to find nothing.
@Suite struct RelayPassTests {
    @Test func aPassSaysWhetherMoreMayBeDue() async throws {
        let database = try await EventsDatabase.make()
        let consumer = TestConsumer(name: "sink", database: database.consumer)
        var configuration = database.relayConfiguration([try await consumer.start()])
        configuration.maxBatch = 2
        configuration.partitionsPerClaim = 2
        let relay = try await database.relay(configuration)
        let sink = configuration.consumers[0]

        // Everything pending fitted: nothing more.
        try await database.append(partition: "a")
        var pass = try await relay.deliverPass(to: sink)
        #expect(pass.delivered == 1 && !pass.more)
        // The read reached its limit (two events of three): more, then the last one and nothing more.
        for _ in 0..<3 { try await database.append(partition: "a") }
        pass = try await relay.deliverPass(to: sink)
        #expect(pass.delivered == 2 && pass.more)
        pass = try await relay.deliverPass(to: sink)
        #expect(pass.delivered == 1 && !pass.more)
        // The claim reached its limit (two partitions of three due): more.
        for partition in ["b", "c", "d"] { try await database.append(partition: partition) }
        pass = try await relay.deliverPass(to: sink)
        #expect(pass.delivered == 2 && pass.more)
        pass = try await relay.deliverPass(to: sink)
        #expect(pass.delivered == 1 && !pass.more)
        // An event appended to a partition while its batch was out: the record sees it pending, so more.
        consumer.control.withLock { $0.delayPerEvent = .milliseconds(500) }
        let first = try await database.append(partition: "e")
        let out = Task { try await relay.deliverPass(to: sink) }
        #expect(try await eventually { consumer.control.withLock { $0.received.contains(first.eventId) } })
        try await database.append(partition: "e")
        pass = try await out.value
        #expect(pass.delivered == 1 && pass.more)
        consumer.control.withLock { $0.delayPerEvent = .zero }
        pass = try await relay.deliverPass(to: sink)
        #expect(pass.delivered == 1 && !pass.more)
        #expect(try await relay.deliverPass(to: sink).delivered == 0)
        await consumer.stop()
        await database.shutdown()
    }
}
