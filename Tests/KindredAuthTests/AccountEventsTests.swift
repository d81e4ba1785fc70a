import Foundation
import KindredGRPC
import KindredIdentity
import KindredPostgres
import KindredProto
import KindredServiceKit
import Logging
import Synchronization
import Testing

@testable import KindredAuth

/// Auth's account events reach a consumer through the service kit's relay: a small "match" service with an
/// EventInbox, called with auth's own service token.
@Suite struct AccountEventsTests {
    /// The consumer: DeliverEvents at kindred.match.v1.MatchService, allowed for auth only, recording each
    /// event's type and user in its own schema.
    final class Consumer: GRPCService, Sendable {
        let inbox: EventInbox
        let authenticator = Mutex<CallerAuthenticator?>(nil)

        init(database: PostgresClient) {
            self.inbox = EventInbox(database: database, logger: Logger(label: "kindred.auth.test.consumer"))
        }

        func register(in router: inout GRPCRouter) {
            router.unary(Kindred.Match.V1.MatchService.Method.deliverEvents) { request, context in
                guard let authenticator = self.authenticator.withLock({ $0 }) else {
                    throw RPCError(.unavailable, "not ready")
                }
                let producer = try await ServiceAccess(authenticator: authenticator).requireService(["auth"], context)
                var response = Kindred.Common.V1.DeliverEventsResponse()
                response.acknowledgedEventIds = try await self.inbox.process(request.events, from: producer) {
                    event,
                    transaction in
                    try await transaction.execute(
                        """
                        INSERT INTO received (type, user_id) VALUES (\(event.payload?.typeName ?? "?"), \(event.userId))
                        """
                    )
                }
                return response
            }
        }
    }

    @Test func deactivationReactivationAndDeletionReachAConsumerInOrder() async throws {
        var postgres = try PostgresConfiguration(try await TestEnvironment.shared.makeDatabase())
        postgres.settings["search_path"] = "consumer"
        let database = PostgresClient(configuration: postgres, logger: Logger(label: "kindred.auth.test.consumer"))
        _ = try await PostgresMigrator(
            schema: "consumer",
            migrations: [
                PostgresMigration(
                    version: 1,
                    name: "inbox",
                    sql: EventInbox.schemaSQL
                        + "\nCREATE TABLE received (id bigserial PRIMARY KEY, type text, user_id text);"
                )
            ]
        ).migrate(on: database, logger: Logger(label: "kindred.auth.test.consumer"))
        let consumer = Consumer(database: database)
        var serverConfiguration = GRPCServerConfiguration()
        serverConfiguration.host = "127.0.0.1"
        serverConfiguration.port = 0
        let server = GRPCServer(
            configuration: serverConfiguration,
            services: [consumer],
            logger: Logger(label: "kindred.auth.test.consumer")
        )
        let port = try await server.start().port ?? 0

        try await AuthHarness.with(configure: {
            $0.events.consumers = [EventConsumer(name: "match", host: "127.0.0.1", port: port)]
            $0.events.pollInterval = .milliseconds(100)
        }) { auth in
            consumer.authenticator.withLock { $0 = auth.server.service.authenticator }
            let adminToken = try await auth.adminUser().accessToken
            let user = try await auth.activeUser()
            var deactivate = Kindred.Auth.V1.DeactivateAccountRequest()
            deactivate.userId = user.account.userId
            deactivate.note = "spam reports"
            _ = try await auth.call(Auth.deactivateAccount, deactivate, token: adminToken)
            var reactivate = Kindred.Auth.V1.ReactivateAccountRequest()
            reactivate.userId = user.account.userId
            _ = try await auth.call(Auth.reactivateAccount, reactivate, token: adminToken)
            // Deactivation ended the user's sessions: a fresh sign-in deletes the account.
            let token = try await auth.signIn(login: user.email).tokens!.accessToken
            var delete = Kindred.Auth.V1.DeleteAccountRequest()
            delete.currentPassword = "correct horse battery"
            _ = try await auth.call(Auth.deleteAccount, delete, token: token)

            func received() async throws -> [String] {
                try await database.query("SELECT type FROM received WHERE user_id = \(user.account.userId) ORDER BY id")
                    .map { try $0.decode(String.self, at: 0) }
            }
            // Generous bound for a loaded machine; a healthy run takes milliseconds.
            let deadline = ContinuousClock.now + .seconds(30)
            let delivered = "kindred_events_delivered_total{producer=\"auth\",consumer=\"match\"} 3"
            while try await received().count < 3 || !auth.server.runner.prometheusText().contains(delivered),
                ContinuousClock.now < deadline
            {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(try await received() == ["account.deactivated", "account.reactivated", "account.deleted"])
            // One registry shows the runtime, the relay, the pool (sampled at the scrape) and the revocation feed.
            let text = auth.server.runner.prometheusText()
            #expect(text.contains(delivered))
            #expect(text.contains("kindred_events_pending{producer=\"auth\",consumer=\"match\"} "))
            #expect(text.contains("db_pool_connections{pool=\"auth\",state=\"in_use\"} "))
            #expect(text.contains("db_pool_opened_total{pool=\"auth\"} "))
            #expect(text.contains("auth_revocation_synced 1.0\n"))
            #expect(text.contains("grpc_server_handled_total{grpc_method=\"/kindred.auth.v1.AuthService/DeleteAccount\",grpc_code=\"OK\"} 1\n"))
        }
        await server.shutdown(grace: .milliseconds(200))
        await database.shutdown()
    }
}
