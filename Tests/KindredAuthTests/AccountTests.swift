import Foundation
import KindredGRPC
import KindredPostgres
import KindredProto
import Testing

@testable import KindredAuth

@Suite("Password, email, username changes, deletion and admin")
struct AccountTests {
    @Test func changePasswordNeedsTheCurrentOneAndEndsOtherSessions() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            let other = try await auth.signIn(login: user.email).tokens!
            var request = Kindred.Auth.V1.ChangePasswordRequest()
            request.currentPassword = "not my password"
            request.newPassword = "a brand new secret"
            await expectRPCError(.unauthenticated, reason: "INVALID_CREDENTIALS") {
                _ = try await auth.call(Auth.changePassword, request, token: user.tokens.accessToken)
            }
            request.currentPassword = "correct horse battery"
            request.newPassword = "password"
            await expectRPCError(.invalidArgument) {
                _ = try await auth.call(Auth.changePassword, request, token: user.tokens.accessToken)
            }
            request.newPassword = "a brand new secret"
            let response = try await auth.call(Auth.changePassword, request, token: user.tokens.accessToken)
            #expect(response.endedSessions == 1)
            await expectRPCError(.unauthenticated) { _ = try await auth.refresh(other.refreshToken) }
            _ = try await auth.refresh(user.tokens.refreshToken)  // the calling session continues
            await expectRPCError(.unauthenticated) { _ = try await auth.signIn(login: user.email) }
            _ = try await auth.signIn(login: user.email, password: "a brand new secret")
        }
    }

    @Test func passwordResetIsEnumerationSafeSingleUseAndEndsSessions() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            var request = Kindred.Auth.V1.RequestPasswordResetRequest()
            request.communityId = auth.community
            request.email = "nobody-\(UUID().uuidString.prefix(8))@example.com"
            let unknown = try await auth.call(Auth.requestPasswordReset, request)
            request.email = user.email
            let known = try await auth.call(Auth.requestPasswordReset, request)
            #expect(unknown == known)
            let mail = try await auth.mails(to: user.email, count: 2)[1]
            #expect(mail.subject == "Reset your password")
            let token = try #require(mail.token)

            var reset = Kindred.Auth.V1.ResetPasswordRequest()
            reset.token = token
            reset.newPassword = "reset to something long"
            #expect(try await auth.call(Auth.resetPassword, reset).endedSessions == 1)
            await expectRPCError(.unauthenticated) { _ = try await auth.refresh(user.tokens.refreshToken) }
            await expectRPCError(.failedPrecondition, reason: "TOKEN_EXPIRED") {
                _ = try await auth.call(Auth.resetPassword, reset)
            }
            _ = try await auth.signIn(login: user.email, password: "reset to something long")
        }
    }

    @Test func expiredResetTokenIsRefused() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            var request = Kindred.Auth.V1.RequestPasswordResetRequest()
            request.communityId = auth.community
            request.email = user.email
            _ = try await auth.call(Auth.requestPasswordReset, request)
            let token = try #require(try await auth.mails(to: user.email, count: 2)[1].token)
            try await auth.database.execute(
                "UPDATE email_tokens SET expires_at = now() - interval '1 second' WHERE purpose = 'reset_password'"
            )
            var reset = Kindred.Auth.V1.ResetPasswordRequest()
            reset.token = token
            reset.newPassword = "reset to something long"
            await expectRPCError(.failedPrecondition) { _ = try await auth.call(Auth.resetPassword, reset) }
        }
    }

    @Test func lockedAccountCanStillResetItsPassword() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            for _ in 0..<5 {
                await expectRPCError(.unauthenticated) {
                    _ = try await auth.signIn(login: user.email, password: "wrong password!")
                }
            }
            await expectRPCError(.resourceExhausted) { _ = try await auth.signIn(login: user.email) }
            var request = Kindred.Auth.V1.RequestPasswordResetRequest()
            request.communityId = auth.community
            request.email = user.email
            _ = try await auth.call(Auth.requestPasswordReset, request)
            var reset = Kindred.Auth.V1.ResetPasswordRequest()
            reset.token = try #require(try await auth.mails(to: user.email, count: 2)[1].token)
            reset.newPassword = "unlocked and renewed"
            _ = try await auth.call(Auth.resetPassword, reset)
            _ = try await auth.signIn(login: user.email, password: "unlocked and renewed")
        }
    }

    @Test func mailSendingRequestsAreRateLimited() async throws {
        try await AuthHarness.with { auth in
            var request = Kindred.Auth.V1.RequestPasswordResetRequest()
            request.communityId = auth.community
            request.email = AuthHarness.uniqueEmail()
            _ = try await auth.call(Auth.requestPasswordReset, request)
            let detail = await expectRPCError(.resourceExhausted, reason: "RATE_LIMITED") {
                _ = try await auth.call(Auth.requestPasswordReset, request)
            }
            #expect((detail?.retryAfterMs ?? 0) > 50_000)
            var resend = Kindred.Auth.V1.ResendVerificationRequest()
            resend.communityId = auth.community
            resend.email = request.email
            await expectRPCError(.resourceExhausted) { _ = try await auth.call(Auth.resendVerification, resend) }
            auth.clock.advance(seconds: 61)
            _ = try await auth.call(Auth.resendVerification, resend)
        }
    }

    @Test func changeEmailConfirmsTheNewAddressAndNotifiesTheOld() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            let newEmail = AuthHarness.uniqueEmail("new")
            var request = Kindred.Auth.V1.ChangeEmailRequest()
            request.newEmail = newEmail.uppercased()
            request.currentPassword = "wrong password!"
            await expectRPCError(.unauthenticated) {
                _ = try await auth.call(Auth.changeEmail, request, token: user.tokens.accessToken)
            }
            request.currentPassword = "correct horse battery"
            let response = try await auth.call(Auth.changeEmail, request, token: user.tokens.accessToken)
            #expect(response.pendingEmail == newEmail)
            let notice = try await auth.mails(to: user.email, count: 2)[1]
            #expect(notice.subject == "Your email address is being changed" && notice.token == nil)
            let link = try await auth.mails(to: newEmail)[0]
            var confirm = Kindred.Auth.V1.ConfirmEmailChangeRequest()
            confirm.token = try #require(link.token)
            #expect(try await auth.call(Auth.confirmEmailChange, confirm).email == newEmail)
            await expectRPCError(.failedPrecondition) { _ = try await auth.call(Auth.confirmEmailChange, confirm) }
            _ = try await auth.signIn(login: newEmail)
            await expectRPCError(.unauthenticated) { _ = try await auth.signIn(login: user.email) }
        }
    }

    @Test func changeEmailToATakenAddressLooksTheSame() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            let other = try await auth.activeUser()
            var request = Kindred.Auth.V1.ChangeEmailRequest()
            request.newEmail = other.email
            request.currentPassword = "correct horse battery"
            let response = try await auth.call(Auth.changeEmail, request, token: user.tokens.accessToken)
            #expect(response.pendingEmail == other.email)
            let mails = try await auth.mails(to: other.email, count: 2)
            #expect(mails[1].subject == "Email change request" && mails[1].token == nil)
        }
    }

    @Test func changeUsername() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            let other = try await auth.activeUser()
            var request = Kindred.Auth.V1.ChangeUsernameRequest()
            request.newUsername = other.username.uppercased()
            await expectRPCError(.alreadyExists, reason: "USERNAME_TAKEN") {
                _ = try await auth.call(Auth.changeUsername, request, token: user.tokens.accessToken)
            }
            request.newUsername = "Fresh.Name_1"
            #expect(
                try await auth.call(Auth.changeUsername, request, token: user.tokens.accessToken).username
                    == "fresh.name_1"
            )
            request.newUsername = "another_name"
            await expectRPCError(.resourceExhausted) {
                _ = try await auth.call(Auth.changeUsername, request, token: user.tokens.accessToken)
            }
            _ = try await auth.signIn(login: "fresh.name_1")
        }
    }

    @Test func deleteAccountLeavesNoRowsAndWritesAnEvent() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            _ = try await auth.signIn(login: user.email)
            var request = Kindred.Auth.V1.DeleteAccountRequest()
            request.currentPassword = "wrong password!"
            await expectRPCError(.unauthenticated) {
                _ = try await auth.call(Auth.deleteAccount, request, token: user.tokens.accessToken)
            }
            request.currentPassword = "correct horse battery"
            let response = try await auth.call(Auth.deleteAccount, request, token: user.tokens.accessToken)
            #expect(response.deletedUnixMs > 0)
            let footprint = try await AccountStore().footprint(of: user.account.userId, in: auth.database)
            #expect(footprint.allSatisfy { $0.1 == 0 }, "\(footprint)")
            let mails = try await auth.database.query(
                "SELECT count(*) FROM mail_outbox WHERE recipient = \(user.email)"
            )
            #expect(try mails.scalar(Int64.self) == 0)
            let rows = try await auth.database.query(
                "SELECT event_type, payload FROM events_outbox WHERE user_id = \(user.account.userId)"
            )
            #expect(rows.count == 1)
            let (type, payload) = try rows[0].decode((String, [UInt8]).self)
            #expect(type == "account.deleted")
            let event = try Kindred.Common.V1.Event(serializedBytes: payload)
            #expect(
                event.producer == "auth" && event.userId == user.account.userId && event.communityId == auth.community
            )
            #expect(event.payload == .accountDeleted(.with { $0.requestedByUser = true }))
            await expectRPCError(.unauthenticated) { _ = try await auth.refresh(user.tokens.refreshToken) }
            await expectRPCError(.unauthenticated) { _ = try await auth.signIn(login: user.email) }
        }
    }

    @Test func deleteAndEmailChangeNeedThePasswordEvenRightAfterSignIn() async throws {
        try await AuthHarness.with { auth in
            // A fresh sign-in is no proof: a stolen access token alone must not delete or take over the account.
            let user = try await auth.activeUser()
            await expectRPCError(.failedPrecondition, reason: "REAUTHENTICATION_REQUIRED") {
                _ = try await auth.call(Auth.deleteAccount, .init(), token: user.tokens.accessToken)
            }
            var change = Kindred.Auth.V1.ChangeEmailRequest()
            change.newEmail = AuthHarness.uniqueEmail("new")
            await expectRPCError(.failedPrecondition, reason: "REAUTHENTICATION_REQUIRED") {
                _ = try await auth.call(Auth.changeEmail, change, token: user.tokens.accessToken)
            }
            #expect(
                try await AccountStore().footprint(of: user.account.userId, in: auth.database).first?.1 == 1
            )
        }
    }

    @Test func adminDeactivatesAndReactivates() async throws {
        try await AuthHarness.with { auth in
            let adminToken = try await auth.adminUser().accessToken
            let user = try await auth.activeUser()
            var deactivate = Kindred.Auth.V1.DeactivateAccountRequest()
            deactivate.userId = user.account.userId
            deactivate.note = "spam reports"
            await expectRPCError(.permissionDenied) {
                _ = try await auth.call(Auth.deactivateAccount, deactivate, token: user.tokens.accessToken)
            }
            let response = try await auth.call(Auth.deactivateAccount, deactivate, token: adminToken)
            #expect(response.account?.status == .deactivated && response.account?.deactivationNote == "spam reports")
            await expectRPCError(.unauthenticated) { _ = try await auth.refresh(user.tokens.refreshToken) }
            await expectRPCError(.permissionDenied, reason: "ACCOUNT_DEACTIVATED") {
                _ = try await auth.signIn(login: user.email)
            }
            // A wrong password still gets the generic answer: deactivation is only revealed after the right one.
            await expectRPCError(.unauthenticated, reason: "INVALID_CREDENTIALS") {
                _ = try await auth.signIn(login: user.email, password: "wrong password!")
            }
            var reactivate = Kindred.Auth.V1.ReactivateAccountRequest()
            reactivate.userId = user.account.userId
            #expect(
                try await auth.call(Auth.reactivateAccount, reactivate, token: adminToken).account?.status == .active
            )
            _ = try await auth.signIn(login: user.email)
            let types = try await auth.database.query(
                "SELECT event_type FROM events_outbox WHERE user_id = \(user.account.userId) ORDER BY id"
            ).map { try $0.decode(String.self, at: 0) }
            #expect(types == ["account.deactivated", "account.reactivated"])
        }
    }

    @Test func getAccountIsOwnerOnly() async throws {
        try await AuthHarness.with { auth in
            let user = try await auth.activeUser()
            let other = try await auth.activeUser()
            let mine = try await auth.call(Auth.getAccount, .init(), token: user.tokens.accessToken)
            #expect(mine.account?.email == user.email && mine.account?.passwordSet == true)
            var request = Kindred.Auth.V1.GetAccountRequest()
            request.userId = other.account.userId
            await expectRPCError(.permissionDenied) {
                _ = try await auth.call(Auth.getAccount, request, token: user.tokens.accessToken)
            }
        }
    }
}
