import KindredLocalization
import KindredPresets

/// The texts of notifications per language, filled with what a notification may show: the other member's display
/// name (from profile's cards), a count, and a message's text only where the member allowed it. Never an email
/// address, a location or a birth date: nothing else reaches these templates. English is the fallback for a
/// language without texts (`LocalizedTexts`, which auth's mails use too). Pure: `NotificationTemplatesTests` walks
/// every kind and language.
struct NotificationTemplates: Sendable {
    /// A rendered notification: the lock screen's title and body.
    struct Text: Sendable, Hashable {
        var title: String
        var body: String
    }

    /// What a template is filled with.
    struct Facts: Sendable, Hashable {
        /// The other member's display name; nil when profile could not say (then a neutral word).
        var name: String?
        /// Mutual match or one-way connection.
        var connection = false
        /// A message's text, only when the recipient allows it on the lock screen.
        var messageText: String?
        /// Likes in a digest.
        var count = 0
        /// An activity broadcast's activity key (one of the community's "activities" values), if it named one; the
        /// text shows its label (``ActivityLabels``).
        var activity: String?
    }

    private struct Language: Sendable {
        let someone: String
        let match: @Sendable (String) -> Text
        let connection: @Sendable (String) -> Text
        let message: @Sendable (String) -> Text
        let likes: @Sendable (Int) -> Text
        let reportOutcome: Text
        /// A followed member's broadcast: their name, and the activity's label in this language when it has one.
        let activity: @Sendable (String, String?) -> Text
    }

    private static let languages = LocalizedTexts<Language>([
        "en": Language(
            someone: "Someone",
            match: { Text(title: "It's a match!", body: "You and \($0) liked each other.") },
            connection: { Text(title: "New connection", body: "\($0) and you are now connected.") },
            message: { Text(title: $0, body: "New message from \($0)") },
            likes: { Text(title: "New likes", body: $0 == 1 ? "1 person liked you" : "\($0) people liked you") },
            reportOutcome: Text(title: "Your report", body: "We reviewed your report. Thank you for telling us."),
            activity: { name, activity in
                Text(title: "Working out now", body: activity.map { "\(name) is working out now: \($0)" } ?? "\(name) is working out now")
            }),
        "fr": Language(
            someone: "Quelqu'un",
            match: { Text(title: "C'est un match !", body: "Vous et \($0) vous êtes plu.") },
            connection: { Text(title: "Nouvelle connexion", body: "\($0) et vous êtes maintenant connectés.") },
            message: { Text(title: $0, body: "Nouveau message de \($0)") },
            likes: {
                Text(title: "Nouveaux likes", body: $0 == 1 ? "1 personne vous a aimé" : "\($0) personnes vous ont aimé")
            },
            reportOutcome: Text(title: "Votre signalement", body: "Nous avons examiné votre signalement. Merci de nous l'avoir dit."),
            activity: { name, activity in
                Text(
                    title: "En pleine séance",
                    body: activity.map { "\(name) s'entraîne en ce moment : \($0)" } ?? "\(name) s'entraîne en ce moment")
            }),
    ])

    /// The languages with texts of their own.
    static var languageCodes: [String] { Self.languages.languageCodes }

    /// The text of `kind` for a device in `locale` (a BCP 47 tag; its language decides).
    static func render(_ kind: NotificationKind, locale: String, _ facts: Facts) -> Text {
        let language = Self.languages.texts(for: locale)
        let name = facts.name.flatMap { $0.isEmpty ? nil : $0 } ?? language.someone
        switch kind {
        case .newMatch:
            return facts.connection ? language.connection(name) : language.match(name)
        case .newMessage:
            var text = language.message(name)
            if let body = facts.messageText, !body.isEmpty { text.body = body }
            return text
        case .likes:
            return language.likes(max(facts.count, 1))
        case .reportOutcome:
            return language.reportOutcome
        case .activity:
            // The preset's label in the device's language; a key without one is not shown (never the raw key).
            let activity = facts.activity.flatMap { ActivityLabels.label(of: $0, locale: locale) }
            return language.activity(name, activity)
        }
    }
}
