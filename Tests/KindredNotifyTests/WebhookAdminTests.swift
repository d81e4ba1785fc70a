import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import Testing

@testable import KindredNotify

private typealias W = Kindred.Notify.V1.WebhookService.Method

@Suite("Webhook endpoints and deliveries against PostgreSQL")
struct WebhookAdminTests {
    static let admin = testKeys.userToken(try! UUIDv7.generate(), community: "dating", roles: ["user", "admin"])

    static func create(
        _ harness: NotifyHarness,
        _ url: String = "https://hooks.example.com/kindred",
        events: [String] = ["match.created"]
    ) async throws -> Notify.CreateWebhookEndpointResponse {
        try await harness.client.call(
            W.createWebhookEndpoint,
            .with {
                $0.url = url
                $0.eventTypes = events
            },
            token: Self.admin
        )
    }

    static func deliveries(_ harness: NotifyHarness, _ endpoint: String) async throws -> [Notify.WebhookDelivery] {
        try await harness.client.call(W.listWebhookDeliveries, .with { $0.endpointId = endpoint }, token: Self.admin)
            .deliveries
    }

    @Test func onlyAdminsManageEndpoints() async throws {
        try await NotifyHarness.with { harness in
            let member = try NotifyHarness.member()
            let request = Notify.CreateWebhookEndpointRequest.with {
                $0.url = "https://hooks.example.com/x"
                $0.eventTypes = ["match.created"]
            }
            #expect(
                await harness.client.failureCode(W.createWebhookEndpoint, request, token: member.token)
                    == .permissionDenied
            )
            #expect(
                await harness.client.failureCode(W.listWebhookEndpoints, .init(), token: member.token)
                    == .permissionDenied
            )
            #expect(
                await harness.client.failureCode(
                    W.createWebhookEndpoint,
                    request,
                    token: testKeys.serviceToken("match")
                )
                    == .permissionDenied
            )
            #expect(try await harness.client.call(W.listWebhookEndpoints, .init(), token: Self.admin).endpoints.isEmpty)
        }
    }

    @Test func badInputIsRefusedAndStoresNothing() async throws {
        try await NotifyHarness.with { harness in
            for (url, events) in [
                ("http://hooks.example.com/x", ["match.created"]), ("https://hooks.example.com/x", []),
                ("https://hooks.example.com/x", ["match.liked"]), ("not a url", ["match.created"]),
            ] {
                let request = Notify.CreateWebhookEndpointRequest.with {
                    $0.url = url
                    $0.eventTypes = events
                }
                #expect(
                    await harness.client.failureCode(W.createWebhookEndpoint, request, token: Self.admin)
                        == .invalidArgument
                )
            }
            let unknown = try UUIDv7.generate()
            #expect(
                await harness.client.failureCode(
                    W.rotateWebhookSecret,
                    .with { $0.endpointId = unknown },
                    token: Self.admin
                )
                    == .notFound
            )
            #expect(
                await harness.client.failureCode(
                    W.updateWebhookEndpoint,
                    .with {
                        $0.endpointId = unknown; $0.updatePaths = ["colour"]
                    },
                    token: Self.admin
                ) == .invalidArgument
            )
            #expect(try await harness.client.call(W.listWebhookEndpoints, .init(), token: Self.admin).endpoints.isEmpty)
        }
    }

    @Test func endpointsAreCreatedUpdatedRotatedAndRemoved() async throws {
        try await NotifyHarness.with { harness in
            let created = try await Self.create(harness, events: ["match.ended", "match.created", "match.created"])
            let id = try #require(created.endpoint).endpointId
            #expect(created.endpoint?.eventTypes == ["match.created", "match.ended"])
            #expect(WebhookSecret(text: created.secret) != nil)
            let updated = try await harness.client.call(
                W.updateWebhookEndpoint,
                .with {
                    $0.endpointId = id
                    $0.url = "https://other.example.com/hook"
                    $0.enabled = false
                    $0.updatePaths = ["url", "enabled"]
                },
                token: Self.admin
            )
            #expect(updated.endpoint?.url == "https://other.example.com/hook" && updated.endpoint?.enabled == false)
            #expect(updated.endpoint?.eventTypes == ["match.created", "match.ended"])
            let rotated = try await harness.client.call(
                W.rotateWebhookSecret,
                .with { $0.endpointId = id },
                token: Self.admin
            )
            #expect(rotated.secret != created.secret && WebhookSecret(text: rotated.secret) != nil)
            #expect((rotated.endpoint?.previousSecretExpiresUnixMs ?? 0) > Int64(Date().timeIntervalSince1970 * 1000))
            let removed = try await harness.client.call(
                W.deleteWebhookEndpoint,
                .with { $0.endpointId = id },
                token: Self.admin
            )
            let again = try await harness.client.call(
                W.deleteWebhookEndpoint,
                .with { $0.endpointId = id },
                token: Self.admin
            )
            #expect(removed.removed && !again.removed)
        }
    }

    @Test func eachEventIsQueuedOncePerMatchingEndpointWithTheInboxRow() async throws {
        try await NotifyHarness.with { harness in
            let matches = try #require(try await Self.create(harness, events: ["match.created"]).endpoint).endpointId
            let deletions = try #require(try await Self.create(harness, events: ["account.deleted"]).endpoint)
                .endpointId
            let off = try #require(try await Self.create(harness, events: ["match.created"]).endpoint).endpointId
            _ = try await harness.client.call(
                W.updateWebhookEndpoint,
                .with {
                    $0.endpointId = off; $0.updatePaths = ["enabled"]
                },
                token: Self.admin
            )
            let (ann, bob) = (try NotifyHarness.member(), try NotifyHarness.member())
            let event = try QueueTests.matchCreated(ann.id, bob.id, match: try UUIDv7.generate())
            _ = try await harness.client.deliver(N.deliverEvents, [event], from: "match", tokens: testKeys)
            _ = try await harness.client.deliver(N.deliverEvents, [event], from: "match", tokens: testKeys)
            let queued = try await Self.deliveries(harness, matches)
            #expect(
                queued.count == 1 && queued.first?.eventType == "match.created" && queued.first?.state != .unspecified
            )
            #expect(try await Self.deliveries(harness, deletions).isEmpty)
            #expect(try await Self.deliveries(harness, off).isEmpty)
            #expect(try await harness.footprint(ann.id)["webhook_deliveries"] == 1)
        }
    }

    @Test func aDeletionErasesEveryDeliveryNamingTheMember() async throws {
        try await NotifyHarness.with { harness in
            let endpoint = try #require(
                try await Self.create(harness, events: ["match.created", "account.deleted"]).endpoint
            ).endpointId
            let (ann, bob) = (try NotifyHarness.member(), try NotifyHarness.member())
            let match = try QueueTests.matchCreated(ann.id, bob.id, match: try UUIDv7.generate())
            _ = try await harness.client.deliver(N.deliverEvents, [match], from: "match", tokens: testKeys)
            var deleted = Kindred.Common.V1.Event()
            deleted.eventId = try UUIDv7.generate()
            deleted.userId = ann.id
            deleted.payload = .accountDeleted(.init())
            _ = try await harness.client.deliver(N.deliverEvents, [deleted], from: "auth", tokens: testKeys)
            #expect(try await harness.footprint(ann.id)["webhook_deliveries"] == 0)
            #expect(try await harness.footprint(bob.id)["webhook_deliveries"] == 0)
            #expect(try await Self.deliveries(harness, endpoint).map(\.eventType) == ["account.deleted"])
        }
    }

    @Test func aReplayQueuesTheSameDeliveryAgainAndPagesAreSigned() async throws {
        try await NotifyHarness.with { harness in
            let endpoint = try #require(try await Self.create(harness).endpoint).endpointId
            for _ in 0..<3 {
                let event = try QueueTests.matchCreated(
                    try UUIDv7.generate(),
                    try UUIDv7.generate(),
                    match: try UUIDv7.generate()
                )
                _ = try await harness.client.deliver(N.deliverEvents, [event], from: "match", tokens: testKeys)
            }
            let first = try await harness.client.call(
                W.listWebhookDeliveries,
                .with {
                    $0.endpointId = endpoint; $0.pageSize = 2
                },
                token: Self.admin
            )
            #expect(first.deliveries.count == 2 && !first.nextPageToken.isEmpty)
            let second = try await harness.client.call(
                W.listWebhookDeliveries,
                .with {
                    $0.endpointId = endpoint; $0.pageSize = 2; $0.pageToken = first.nextPageToken
                },
                token: Self.admin
            )
            #expect(second.deliveries.count == 1 && second.nextPageToken.isEmpty)
            #expect(
                await harness.client.failureCode(
                    W.listWebhookDeliveries,
                    .with {
                        $0.endpointId = endpoint; $0.pageToken = first.nextPageToken + "x"
                    },
                    token: Self.admin
                ) == .invalidArgument
            )
            let target = try #require(second.deliveries.first)
            try await harness.database.execute(
                "UPDATE webhook_deliveries SET state = 'failed', attempts = 15 WHERE delivery_id = \(target.deliveryId)::uuid"
            )
            let replayed = try await harness.client.call(
                W.replayWebhookDelivery,
                .with { $0.deliveryId = target.deliveryId },
                token: Self.admin
            )
            #expect(replayed.delivery?.deliveryId == target.deliveryId)
            #expect(replayed.delivery?.state == .pending && replayed.delivery?.attempts == 0)
        }
    }
}
