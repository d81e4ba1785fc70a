/// Auth's mails, in the recipient account's language (`MailTemplates`; English when the locale has no texts),
/// with the links built from `KINDRED_AUTH_LINK_BASE_URL`.
struct MailComposer: Sendable {
    let configuration: AuthConfiguration

    private func link(_ path: String, _ token: String) -> String {
        "\(self.configuration.linkBaseURL)/\(path)?token=\(token)"
    }

    private func mail(_ template: String, to email: String, _ text: MailTemplates.Text) -> OutgoingMail {
        OutgoingMail(template: template, recipient: email, subject: text.subject, body: text.body)
    }

    func verification(to email: String, locale: String?, token: String, code: String) -> OutgoingMail {
        let texts = MailTemplates.texts(for: locale)
        return self.mail("verify_email", to: email, texts.verification(self.link("verify-email", token), code))
    }

    func alreadyRegistered(to email: String, locale: String?) -> OutgoingMail {
        self.mail("already_registered", to: email, MailTemplates.texts(for: locale).alreadyRegistered)
    }

    func passwordReset(to email: String, locale: String?, token: String) -> OutgoingMail {
        let texts = MailTemplates.texts(for: locale)
        return self.mail("password_reset", to: email, texts.passwordReset(self.link("reset-password", token)))
    }

    func emailChangeConfirmation(to email: String, locale: String?, token: String) -> OutgoingMail {
        let texts = MailTemplates.texts(for: locale)
        return self.mail(
            "email_change_confirmation",
            to: email,
            texts.emailChangeConfirmation(self.link("confirm-email", token))
        )
    }

    func emailChangeNotice(to email: String, locale: String?) -> OutgoingMail {
        self.mail("email_change_notice", to: email, MailTemplates.texts(for: locale).emailChangeNotice)
    }

    func addressInUseNotice(to email: String, locale: String?) -> OutgoingMail {
        self.mail("address_in_use", to: email, MailTemplates.texts(for: locale).addressInUse)
    }
}
