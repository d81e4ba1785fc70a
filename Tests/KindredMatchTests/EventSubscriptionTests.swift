import KindredServiceKit
import KindredServiceTesting
import Testing

@testable import KindredMatch

/// Producers send match only the event types its `EventSubscriptions` entry lists: match's effects must be
/// exactly those, producer by producer.
@Suite struct EventSubscriptionTests {
    @Test func matchAppliesExactlyTheTypesItSubscribesTo() async throws {
        try await MatchHarness.with { match in
            let service = match.server.server.service
            #expect(EventSubscriptionTesting.disagreements(consumer: "match") { service.effect(of: $0) } == [])
        }
    }
}
