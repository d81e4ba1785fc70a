import Foundation
import KindredGRPC
import KindredLocalization
import KindredProto
import Testing

@testable import KindredAuth

@Suite("Mails per locale")
struct MailTemplatesTests {
    /// Every mail of every language, filled with a recognisable link and code.
    private static func everyMail(_ language: MailTemplates.Language) -> [String: MailTemplates.Text] {
        [
            "verify_email": language.verification("https://x.invalid/verify-email?token=TOKEN", "123456"),
            "already_registered": language.alreadyRegistered,
            "password_reset": language.passwordReset("https://x.invalid/reset-password?token=TOKEN"),
            "email_change_confirmation": language.emailChangeConfirmation("https://x.invalid/confirm-email?token=TOKEN"),
            "email_change_notice": language.emailChangeNotice,
            "address_in_use": language.addressInUse,
        ]
    }

    @Test func everyMailHasTextsInEveryLanguageAndCarriesItsLink() {
        #expect(MailTemplates.languageCodes == ["en", "fr"])
        let english = Self.everyMail(MailTemplates.texts(for: "en"))
        for code in MailTemplates.languageCodes {
            let mails = Self.everyMail(MailTemplates.texts(for: code))
            for (template, text) in mails {
                #expect(!text.subject.isEmpty && !text.body.isEmpty, "\(template) in \(code)")
                // Translated, not copied (each language its own subject).
                if code != "en" { #expect(text.subject != english[template]?.subject, "\(template) in \(code)") }
            }
            #expect(mails["verify_email"]!.body.contains("token=TOKEN"))
            #expect(mails["verify_email"]!.body.contains("123456"))
            #expect(mails["password_reset"]!.body.contains("token=TOKEN"))
            #expect(mails["email_change_confirmation"]!.body.contains("token=TOKEN"))
        }
    }

    @Test(arguments: [
        ("en", "Confirm your email address"),
        ("en-GB", "Confirm your email address"),
        ("fr", "Confirmez votre adresse e-mail"),
        ("fr-CA", "Confirmez votre adresse e-mail"),
        ("FR_fr", "Confirmez votre adresse e-mail"),
        // No texts of its own, or no locale: English.
        ("de-DE", "Confirm your email address"),
        ("", "Confirm your email address"),
    ])
    func theLocalesLanguageDecidesAndEnglishIsTheFallback(locale: String, subject: String) {
        #expect(MailTemplates.texts(for: locale).verification("l", "c").subject == subject)
    }

    @Test func theLanguageCodeOfALocale() {
        #expect(LocalizedTexts<Int>.languageCode(of: "fr-CA") == "fr")
        #expect(LocalizedTexts<Int>.languageCode(of: "pt_BR") == "pt")
        #expect(LocalizedTexts<Int>.languageCode(of: "EN") == "en")
        #expect(LocalizedTexts<Int>.languageCode(of: "") == nil)
        #expect(LocalizedTexts<Int>.languageCode(of: "-") == nil)
        #expect(LocalizedTexts<Int>.languageCode(of: nil) == nil)
    }

    @Test func aFrenchAccountGetsFrenchMailsThroughTheRelay() async throws {
        try await AuthHarness.with { auth in
            let email = AuthHarness.uniqueEmail("fr")
            try await auth.signUp(email: email, username: AuthHarness.uniqueUsername(), locale: "fr-FR")
            let verification = try await auth.mails(to: email)[0]
            #expect(verification.subject == "Confirmez votre adresse e-mail")
            #expect(verification.text.contains("Ou saisissez ce code dans l'application : "))
            _ = try await auth.verify(token: try #require(verification.token))
            auth.clock.advance(seconds: 61)  // past the per-address mail limit

            // A mail the account did not ask for in its own words (no locale in the request) is French too.
            var reset = Kindred.Auth.V1.RequestPasswordResetRequest()
            reset.communityId = auth.community
            reset.email = email
            _ = try await auth.call(Auth.requestPasswordReset, reset)
            let mail = try await auth.mails(to: email, count: 2)[1]
            #expect(mail.subject == "Réinitialisez votre mot de passe")
            #expect(mail.token != nil)
        }
    }

    @Test func anAccountInALanguageWithoutTextsGetsEnglish() async throws {
        try await AuthHarness.with { auth in
            let email = AuthHarness.uniqueEmail("de")
            try await auth.signUp(email: email, username: AuthHarness.uniqueUsername(), locale: "de-AT")
            let mail = try await auth.mails(to: email)[0]
            #expect(mail.subject == "Confirm your email address")
            #expect(mail.code != nil)
            let stored = try await auth.database.query("SELECT locale FROM accounts WHERE email = \(email)")
            #expect(try stored[0].decode(String.self, at: 0) == "de-AT")
        }
    }
}
