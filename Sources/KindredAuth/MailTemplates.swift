import KindredLocalization

/// The texts of auth's mails per language, chosen by the account's `locale` the way notify chooses a push's
/// (`LocalizedTexts`: the tag's language decides, English is the fallback). Each template is filled with a link
/// or a code only — never a name or anything else of the account. Pure: `MailTemplatesTests` walks every mail in
/// every language.
enum MailTemplates {
    /// A mail's subject and plain-text body.
    struct Text: Sendable, Hashable {
        var subject: String
        var body: String
    }

    /// One language's mails.
    struct Language: Sendable {
        let verification: @Sendable (_ link: String, _ code: String) -> Text
        let alreadyRegistered: Text
        let passwordReset: @Sendable (_ link: String) -> Text
        let emailChangeConfirmation: @Sendable (_ link: String) -> Text
        let emailChangeNotice: Text
        let addressInUse: Text
    }

    /// The languages with texts of their own.
    static var languageCodes: [String] { Self.languages.languageCodes }

    /// The mails for an account whose locale is `locale` (a BCP 47 tag; English when nil or without texts).
    static func texts(for locale: String?) -> Language { Self.languages.texts(for: locale) }

    private static let languages = LocalizedTexts<Language>([
        "en": Language(
            verification: { link, code in
                Text(
                    subject: "Confirm your email address",
                    body: """
                        Welcome to Kindred!

                        Confirm your email address with this link (valid for 24 hours):
                        \(link)

                        Or type this code in the app: \(code)

                        If you did not sign up, ignore this mail.
                        """
                )
            },
            alreadyRegistered: Text(
                subject: "You already have a Kindred account",
                body: """
                    Someone (hopefully you) tried to sign up with this address, but it already has an account.
                    Sign in, or reset your password if you forgot it. If it was not you, ignore this mail.
                    """
            ),
            passwordReset: { link in
                Text(
                    subject: "Reset your password",
                    body: """
                        Reset your Kindred password with this link (valid for 30 minutes, once):
                        \(link)

                        If you did not ask for this, ignore this mail; your password stays unchanged.
                        """
                )
            },
            emailChangeConfirmation: { link in
                Text(
                    subject: "Confirm your new email address",
                    body: """
                        Confirm that this is the new address of your Kindred account (valid for 1 hour, once):
                        \(link)
                        """
                )
            },
            emailChangeNotice: Text(
                subject: "Your email address is being changed",
                body: """
                    A change of your Kindred account's email address was requested. If it was not you, \
                    reset your password now.
                    """
            ),
            addressInUse: Text(
                subject: "Email change request",
                body: """
                    Someone asked to move a Kindred account to this address, but it already belongs to an account.
                    No change was made. If it was not you, ignore this mail.
                    """
            )
        ),
        "fr": Language(
            verification: { link, code in
                Text(
                    subject: "Confirmez votre adresse e-mail",
                    body: """
                        Bienvenue sur Kindred !

                        Confirmez votre adresse e-mail avec ce lien (valable 24 heures) :
                        \(link)

                        Ou saisissez ce code dans l'application : \(code)

                        Si vous ne vous êtes pas inscrit, ignorez ce message.
                        """
                )
            },
            alreadyRegistered: Text(
                subject: "Vous avez déjà un compte Kindred",
                body: """
                    Quelqu'un (vous, espérons-le) a tenté de s'inscrire avec cette adresse, mais elle a déjà \
                    un compte.
                    Connectez-vous, ou réinitialisez votre mot de passe si vous l'avez oublié. Si ce n'était pas \
                    vous, ignorez ce message.
                    """
            ),
            passwordReset: { link in
                Text(
                    subject: "Réinitialisez votre mot de passe",
                    body: """
                        Réinitialisez votre mot de passe Kindred avec ce lien (valable 30 minutes, une seule fois) :
                        \(link)

                        Si vous n'avez rien demandé, ignorez ce message ; votre mot de passe reste inchangé.
                        """
                )
            },
            emailChangeConfirmation: { link in
                Text(
                    subject: "Confirmez votre nouvelle adresse e-mail",
                    body: """
                        Confirmez que c'est la nouvelle adresse de votre compte Kindred (valable 1 heure, une seule \
                        fois) :
                        \(link)
                        """
                )
            },
            emailChangeNotice: Text(
                subject: "Votre adresse e-mail va changer",
                body: """
                    Un changement de l'adresse e-mail de votre compte Kindred a été demandé. Si ce n'était pas \
                    vous, réinitialisez votre mot de passe maintenant.
                    """
            ),
            addressInUse: Text(
                subject: "Demande de changement d'adresse",
                body: """
                    Quelqu'un a demandé à déplacer un compte Kindred vers cette adresse, mais elle appartient \
                    déjà à un compte. Rien n'a été changé. Si ce n'était pas vous, ignorez ce message.
                    """
            )
        ),
    ])
}
