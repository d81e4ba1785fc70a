import KindredServiceKit
import KindredServiceTesting
import Testing

@testable import KindredProfile

/// Producers send profile only the event types its `EventSubscriptions` entry lists: profile's effects must be
/// exactly those, producer by producer.
@Suite struct EventSubscriptionTests {
    @Test func profileAppliesExactlyTheTypesItSubscribesTo() async throws {
        try await ProfileHarness.with { profile in
            let service = profile.profile.server.profiles
            #expect(EventSubscriptionTesting.disagreements(consumer: "profile") { service.effect(of: $0) } == [])
        }
    }
}
