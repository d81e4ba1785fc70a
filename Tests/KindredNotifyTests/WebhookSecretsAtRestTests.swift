import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredPostgres
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import Logging
import Testing

@testable import KindredNotify

private typealias W = Kindred.Notify.V1.WebhookService.Method

/// Webhook signing secrets at rest: sealed with `KINDRED_NOTIFY_WEBHOOK_KEY` (AES-256-GCM), never in the clear in
/// `webhook_endpoints`; rows an older version wrote in the clear sealed when notify starts; a wrong or missing key
/// stops the start with an error naming the setting.
@Suite("Webhook secrets sealed at rest against PostgreSQL")
struct WebhookSecretsAtRestTests {
    static let logger = Logger(label: "kindred.notify.test")

    /// Every stored secret value of every endpoint, with its sealed flag.
    static func stored(_ harness: NotifyHarness) async throws -> [(id: String, values: [[UInt8]], sealed: Bool)] {
        try await WebhookStore().storedSecrets(in: harness.database).map {
            ($0.endpointID, [$0.secret] + ($0.previousSecret.map { [$0] } ?? []), $0.sealed)
        }
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        haystack.count >= needle.count
            && (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }

    @Test func theTableHoldsNoSecretInTheClear() async throws {
        try await NotifyHarness.with { harness in
            let created = try await WebhookAdminTests.create(harness)
            let id = try #require(created.endpoint).endpointId
            let rotated = try await harness.client.call(W.rotateWebhookSecret, .with { $0.endpointId = id },
                                                        token: WebhookAdminTests.admin)
            let secrets = try [created.secret, rotated.secret].map { try #require(WebhookSecret(text: $0)).key }
            let rows = try await Self.stored(harness)
            try #require(rows.count == 1)
            let row = rows[0]
            #expect(row.sealed && row.values.count == 2)
            for value in row.values {
                for secret in secrets { #expect(!Self.contains(value, secret), "a secret stored in the clear") }
            }
            // They open with the key, for this endpoint only: the current one first.
            let key = WebhookSecretKey(text: testWebhookKey)
            #expect(try row.values.map { try key.open($0, endpoint: id).key } == secrets.reversed())
            let other = try UUIDv7.generate()
            #expect(throws: WebhookSecretKey.WrongKey.self) { try key.open(row.values[0], endpoint: other) }
        }
    }

    @Test func rowsWrittenInTheClearAreSealedAtStartAndAWrongKeyStopsIt() async throws {
        try await NotifyHarness.with { harness in
            // Rows as an older version wrote them: the bytes in the clear.
            let (current, previous) = (try WebhookSecret.generate(), try WebhookSecret.generate())
            let id = try UUIDv7.generate()
            try await harness.database.execute(
                """
                INSERT INTO webhook_endpoints (endpoint_id, url, event_types, secret, previous_secret,
                                               previous_secret_expires_at)
                VALUES (\(id)::uuid, 'https://hooks.example.com/old', '{match.created}', \(current.key),
                        \(previous.key), now() + interval '1 hour')
                """)
            let key = WebhookSecretKey(text: testWebhookKey)
            try await WebhookSecretsAtRest.prepare(key: key, database: harness.database, logger: Self.logger)
            let rows = try await Self.stored(harness)
            try #require(rows.count == 1)
            let row = rows[0]
            #expect(row.sealed)
            #expect(!Self.contains(row.values[0], current.key) && !Self.contains(row.values[1], previous.key))
            #expect(try row.values.map { try key.open($0, endpoint: id) } == [current, previous])
            // A second start changes nothing.
            try await WebhookSecretsAtRest.prepare(key: key, database: harness.database, logger: Self.logger)
            #expect(try await Self.stored(harness)[0].values == row.values)

            // Another key, or none, is refused naming the setting, and seals or changes nothing.
            for other in [WebhookSecretKey(text: String(testWebhookKey.reversed())), nil] {
                let error = await #expect(throws: ConfigurationError.self) {
                    try await WebhookSecretsAtRest.prepare(key: other, database: harness.database, logger: Self.logger)
                }
                #expect(error?.key == "KINDRED_NOTIFY_WEBHOOK_KEY")
            }
            #expect(try await Self.stored(harness)[0].values == row.values)
        }
    }

    @Test func withoutAKeyNoSecretIsMade() async throws {
        try await NotifyHarness.with(settings: ["KINDRED_NOTIFY_WEBHOOK_KEY": ""]) { harness in
            let request = Notify.CreateWebhookEndpointRequest.with {
                $0.url = "https://hooks.example.com/kindred"
                $0.eventTypes = ["match.created"]
            }
            #expect(
                await harness.client.failureCode(W.createWebhookEndpoint, request, token: WebhookAdminTests.admin)
                    == .failedPrecondition)
            let stored = try await Self.stored(harness)
            #expect(stored.isEmpty)
        }
    }
}
