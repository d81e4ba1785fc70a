import Foundation
import KindredGRPC
import KindredGRPCServices
import KindredProto
import Testing

/// Errors leave auth through the runtime's one mapping (no per-route wrapper): domain errors with their
/// reason, database failures through `PostgresError`'s mapping; both carry the call's request id.
@Suite("Auth error paths")
struct ErrorPathTests {
    @Test("a database failure answers INTERNAL with a fixed message and reason INTERNAL")
    func databaseFailure() async throws {
        try await AuthHarness.with { auth in
            var request = Kindred.Auth.V1.CheckUsernameRequest()
            request.communityId = auth.community
            request.username = "someone"
            // A schema the code does not expect: every query on accounts fails (undefined table).
            try await auth.database.execute("ALTER TABLE accounts RENAME TO accounts_elsewhere")
            do {
                _ = try await auth.client.unary(Auth.checkUsername, request, metadata: ["x-request-id": "req-db-1"])
                Issue.record("the call succeeded without its table")
            } catch let error as RPCError {
                #expect(error.code == .internalError)
                #expect(error.message == "The server failed to process the call")
                #expect(error.errorDetail?.reason == "INTERNAL")
                #expect(error.errorDetail?.requestId == "req-db-1")
            }
            try await auth.database.execute("ALTER TABLE accounts_elsewhere RENAME TO accounts")
            #expect(try await auth.call(Auth.checkUsername, request).available)
        }
    }

    @Test("a domain error carries its reason and field violations")
    func domainError() async throws {
        try await AuthHarness.with { auth in
            var request = Kindred.Auth.V1.CheckUsernameRequest()
            request.communityId = auth.community
            request.username = String(repeating: "a", count: 65)
            let detail = await expectRPCError(.invalidArgument, reason: "INVALID_ARGUMENT") {
                _ = try await auth.call(Auth.checkUsername, request)
            }
            #expect(detail?.fieldViolations.map(\.field) == ["username"])
        }
    }
}
