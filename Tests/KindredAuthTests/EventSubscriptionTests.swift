import KindredServiceKit
import KindredServiceTesting
import Testing

@testable import KindredAuth

/// Producers send auth only the event types its `EventSubscriptions` entry lists: auth's effects must be exactly
/// those, producer by producer.
@Suite struct EventSubscriptionTests {
    @Test func authAppliesExactlyTheTypesItSubscribesTo() async throws {
        try await AuthHarness.with { auth in
            let service = auth.server.service
            #expect(EventSubscriptionTesting.disagreements(consumer: "auth") { service.effect(of: $0) } == [])
        }
    }
}
