import KindredProto
import KindredProtobuf
import Testing

@testable import KindredGateway

/// The gateway passes webhook calls through as bytes: the public messages of `api/v1/webhooks.proto` must be
/// notify's field for field. Every field set on one side comes back unchanged through the other.
@Suite("Webhook messages are notify's, field for field")
struct WebhookAPITests {
    typealias N = Kindred.Notify.V1
    typealias A = Kindred.Api.V1

    static let endpoint = N.WebhookEndpoint.with {
        $0.endpointId = "e"
        $0.url = "https://hooks.example.com/x"
        $0.eventTypes = ["match.created", "match.ended"]
        $0.enabled = true
        $0.disabledReason = "GONE"
        $0.description = "d"
        $0.createdUnixMs = 1
        $0.previousSecretExpiresUnixMs = 2
    }
    static let delivery = N.WebhookDelivery.with {
        $0.deliveryId = "d"
        $0.endpointId = "e"
        $0.eventType = "match.created"
        $0.state = .failed
        $0.attempts = 3
        $0.lastStatus = 500
        $0.lastError = "HTTP 500"
        $0.createdUnixMs = 4
        $0.nextAttemptUnixMs = 5
        $0.deliveredUnixMs = 6
    }

    static func roundTrip<Notify: ProtoMessage & Equatable, Public: ProtoMessage>(_ message: Notify, via _: Public.Type)
        throws -> Bool
    {
        let outward = try Gateway.rewrap(message, as: Public.self)
        return try Gateway.rewrap(outward, as: Notify.self) == message
            && (try outward.serializedBytes()) == (try message.serializedBytes())
    }

    @Test func everyRequestAndAnswerPassesUnchanged() throws {
        #expect(
            try Self.roundTrip(
                N.CreateWebhookEndpointRequest.with {
                    $0.url = "u"; $0.eventTypes = ["a"]; $0.description = "d"
                },
                via: A.CreateWebhookEndpointRequest.self
            )
        )
        #expect(
            try Self.roundTrip(
                N.CreateWebhookEndpointResponse.with {
                    $0.endpoint = Self.endpoint; $0.secret = "whsec_x"
                },
                via: A.CreateWebhookEndpointResponse.self
            )
        )
        #expect(
            try Self.roundTrip(
                N.ListWebhookEndpointsResponse.with { $0.endpoints = [Self.endpoint] },
                via: A.ListWebhookEndpointsResponse.self
            )
        )
        #expect(
            try Self.roundTrip(
                N.UpdateWebhookEndpointRequest.with {
                    $0.endpointId = "e"; $0.url = "u"; $0.eventTypes = ["a"]; $0.enabled = true; $0.description = "d"
                    $0.updatePaths = ["url"]
                },
                via: A.UpdateWebhookEndpointRequest.self
            )
        )
        #expect(
            try Self.roundTrip(
                N.UpdateWebhookEndpointResponse.with { $0.endpoint = Self.endpoint },
                via: A.UpdateWebhookEndpointResponse.self
            )
        )
        #expect(
            try Self.roundTrip(
                N.DeleteWebhookEndpointRequest.with { $0.endpointId = "e" },
                via: A.DeleteWebhookEndpointRequest.self
            )
        )
        #expect(
            try Self.roundTrip(
                N.DeleteWebhookEndpointResponse.with { $0.removed = true },
                via: A.DeleteWebhookEndpointResponse.self
            )
        )
        #expect(
            try Self.roundTrip(
                N.RotateWebhookSecretRequest.with { $0.endpointId = "e" },
                via: A.RotateWebhookSecretRequest.self
            )
        )
        #expect(
            try Self.roundTrip(
                N.RotateWebhookSecretResponse.with {
                    $0.endpoint = Self.endpoint; $0.secret = "s"
                },
                via: A.RotateWebhookSecretResponse.self
            )
        )
        #expect(
            try Self.roundTrip(
                N.ListWebhookDeliveriesRequest.with {
                    $0.endpointId = "e"; $0.state = .delivered; $0.pageSize = 7; $0.pageToken = "t"
                },
                via: A.ListWebhookDeliveriesRequest.self
            )
        )
        #expect(
            try Self.roundTrip(
                N.ListWebhookDeliveriesResponse.with {
                    $0.deliveries = [Self.delivery]; $0.nextPageToken = "t"
                },
                via: A.ListWebhookDeliveriesResponse.self
            )
        )
        #expect(
            try Self.roundTrip(
                N.ReplayWebhookDeliveryRequest.with { $0.deliveryId = "d" },
                via: A.ReplayWebhookDeliveryRequest.self
            )
        )
        #expect(
            try Self.roundTrip(
                N.ReplayWebhookDeliveryResponse.with { $0.delivery = Self.delivery },
                via: A.ReplayWebhookDeliveryResponse.self
            )
        )
    }
}
