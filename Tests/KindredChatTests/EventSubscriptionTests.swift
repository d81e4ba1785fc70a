import KindredServiceKit
import KindredServiceTesting
import Testing

@testable import KindredChat

/// Producers send chat only the event types its `EventSubscriptions` entry lists: chat's effects must be exactly
/// those, producer by producer.
@Suite struct EventSubscriptionTests {
    @Test func chatAppliesExactlyTheTypesItSubscribesTo() async throws {
        try await ChatHarness.with { chat in
            let service = chat.chat.server.service
            #expect(EventSubscriptionTesting.disagreements(consumer: "chat") { service.effect(of: $0) } == [])
        }
    }
}
