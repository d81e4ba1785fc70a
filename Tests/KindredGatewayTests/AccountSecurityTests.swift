import Foundation
import KindredAuth
import KindredGRPC
import KindredGRPCServices
import KindredGateway
import KindredIdentity
import KindredProto
import Testing

typealias Admin = Kindred.Api.V1.AdminService.Method
typealias Home = Kindred.Api.V1.HomeService.Method

/// The holes an outside security test found (issue 8), each checked through the gateway.
@Suite("Account security through the gateway")
struct AccountSecurityTests {
    static let password = "correct horse battery"

    /// Limits lifted so that many sign-ups from one test address are not throttled.
    static func unthrottled(_ configuration: inout AuthConfiguration) {
        configuration.ipRequestsPerMinute = 100_000
        configuration.mailsPerIPPerHour = 100_000
    }

    static func openGateway(_ configuration: inout GatewayConfiguration) {
        configuration.anonymousBurst = 100_000
        configuration.anonymousRate = 100_000
        configuration.clientBurst = 100_000
        configuration.clientRate = 100_000
        configuration.accountBurst = 100_000
        configuration.accountRate = 100_000
    }

    // MARK: 1. Sign-up

    /// The whole answer of one call: status code, message and ErrorDetail (request id cleared: it differs per call).
    struct Answer: Equatable, CustomStringConvertible {
        var code: StatusCode
        var message: String
        var detail: Kindred.Common.V1.ErrorDetail?
        var response: Api.SignUpResponse?
        var description: String { "\(self.code) \(self.message) \(String(describing: self.detail))" }
    }

    static func signUp(_ harness: GatewayHarness, email: String, username: String, password: String = password)
        async -> Answer
    {
        var request = Api.SignUpRequest()
        request.communityId = harness.community
        request.email = email
        request.username = username
        request.password = password
        do {
            let response = try await harness.client.unary(Account.signUp, request)
            return Answer(code: .ok, message: "", detail: nil, response: response)
        } catch let error as RPCError {
            var detail = error.errorDetail
            #expect(detail?.requestId.isEmpty == false)
            detail?.requestId = ""
            return Answer(code: error.code, message: error.message, detail: detail, response: nil)
        } catch {
            return Answer(code: .unknown, message: "\(error)", detail: nil, response: nil)
        }
    }

    @Test("sign-up answers (code, message, details, Argon2 work, time) depend on the username, never on the email")
    func signUpDoesNotRevealEmails() async throws {
        try await GatewayHarness.with(configure: Self.openGateway, configureAuth: Self.unthrottled) { harness in
            // Accounts whose emails are "known"; one of them also holds the taken username.
            let rounds = 5
            var known: [String] = []
            for index in 0..<(3 * rounds) {
                let name = "known\(index)x\(UInt16.random(in: 0...UInt16.max))"
                _ = try await harness.insertedUser(name)
                known.append("\(name)@example.com")
            }
            let taken = String(known[0].split(separator: "@")[0])
            enum Email { case known, unknown }
            enum Username { case free, taken }
            let combinations: [(Email, Username)] = [(.known, .taken), (.unknown, .taken), (.known, .free), (.unknown, .free)]
            var answers: [String: [Answer]] = [:]
            var durations: [String: [Duration]] = [:]
            var nextKnown = 1
            for round in 0..<rounds {
                for (email, username) in combinations {
                    let key = "\(email)/\(username)"
                    let address: String
                    switch email {
                    case .known:
                        address = known[nextKnown]
                        nextKnown += 1
                    case .unknown: address = "nobody\(round)x\(UInt32.random(in: 0...UInt32.max))@example.com"
                    }
                    let name = username == .taken ? taken : "free\(round)x\(UInt32.random(in: 0...UInt32.max))"
                    let before = harness.auth.hasher.computations
                    let started = ContinuousClock.now
                    answers[key, default: []].append(await Self.signUp(harness, email: address, username: name))
                    durations[key, default: []].append(ContinuousClock.now - started)
                    // The same work on every path: exactly one Argon2 computation.
                    #expect(harness.auth.hasher.computations - before == 1, "\(key)")
                }
            }
            // The taken username's owner with a wrong password: the same answer as everyone else.
            let owner = await Self.signUp(harness, email: known[0], username: taken, password: "another good password")
            #expect(owner == answers["unknown/taken"]?.first)

            for username in ["taken", "free"] {
                let all = (answers["known/\(username)"] ?? []) + (answers["unknown/\(username)"] ?? [])
                #expect(Set(all.map(\.description)).count == 1, "\(all)")
            }
            #expect(answers["unknown/taken"]?.first?.code == .alreadyExists)
            #expect(answers["unknown/taken"]?.first?.detail?.reason == "USERNAME_TAKEN")
            #expect(answers["unknown/free"]?.first?.code == .ok)

            // Timing: medians of the four paths within a generous factor (the Argon2 count above is the exact check).
            func median(_ values: [Duration]) -> Double {
                let sorted = values.map { Double($0.components.attoseconds) / 1e18 + Double($0.components.seconds) }.sorted()
                return sorted[sorted.count / 2]
            }
            let medians = durations.mapValues(median)
            let slowest = medians.values.max()!, fastest = medians.values.min()!
            // 50 ms of slack: a loaded CI machine stalls single calls; a path doing different work shows in the count.
            #expect(slowest < fastest * 5 + 0.05, "\(medians)")
        }
    }

    // MARK: 2. Email change and deletion need the password

    @Test("ChangeEmail and DeleteAccount refuse an access token without the password, even right after sign-in")
    func reauthenticationNeedsThePassword() async throws {
        try await GatewayHarness.with { harness in
            let tokens = try await harness.signedInUser("mallory")
            var change = Api.ChangeEmailRequest()
            change.newEmail = "attacker@example.com"
            let refused = await expectRPCError(.failedPrecondition) {
                _ = try await harness.client.unary(Account.changeEmail, change, metadata: GatewayHarness.bearer(tokens))
            }
            #expect(refused.flatMap(errorDetail)?.reason == "REAUTHENTICATION_REQUIRED")
            let deleteRefused = await expectRPCError(.failedPrecondition) {
                _ = try await harness.client.unary(
                    Account.deleteAccount, Api.DeleteAccountRequest(), metadata: GatewayHarness.bearer(tokens))
            }
            #expect(deleteRefused.flatMap(errorDetail)?.reason == "REAUTHENTICATION_REQUIRED")
            change.currentPassword = "not the password"
            let wrong = await expectRPCError(.unauthenticated) {
                _ = try await harness.client.unary(Account.changeEmail, change, metadata: GatewayHarness.bearer(tokens))
            }
            #expect(wrong.flatMap(errorDetail)?.reason == "INVALID_CREDENTIALS")
            change.currentPassword = Self.password
            let started = try await harness.client.unary(
                Account.changeEmail, change, metadata: GatewayHarness.bearer(tokens))
            #expect(started.pendingEmail == "attacker@example.com")
            let account = try await harness.client.unary(
                Account.getAccount, Api.GetAccountRequest(), metadata: GatewayHarness.bearer(tokens))
            #expect(account.account?.email == "mallory@example.com")
        }
    }

    // MARK: 5. CheckUsername

    @Test("CheckUsername: 1..64 characters, else INVALID_ARGUMENT without echoing the input")
    func checkUsernameIsBounded() async throws {
        try await GatewayHarness.with { harness in
            for username in [String(repeating: "a", count: 1 << 20), String(repeating: "b", count: 65), ""] {
                var check = Api.CheckUsernameRequest()
                check.communityId = harness.community
                check.username = username
                let error = await expectRPCError(.invalidArgument) {
                    _ = try await harness.client.unary(Account.checkUsername, check)
                }
                let detail = error.flatMap(errorDetail)
                #expect(detail?.fieldViolations.map(\.field) == ["username"])
                #expect((error?.message.count ?? 0) < 200)
                #expect(detail.map { (try? $0.serializedBytes().count) ?? 0 } ?? 0 < 500)
            }
            var check = Api.CheckUsernameRequest()
            check.communityId = harness.community
            check.username = String(repeating: "C", count: 64)
            let answer = try await harness.client.unary(Account.checkUsername, check)
            #expect(!answer.available && answer.unavailableReason == "INVALID_FORMAT")
            #expect(answer.normalizedUsername == String(repeating: "c", count: 64))
        }
    }
}
