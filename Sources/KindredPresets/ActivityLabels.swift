import KindredLocalization

/// The fitness preset's activities (``CommunityPresets/fitness``, attribute "activities") as a member reads them in
/// their language, lowercase, to sit inside a sentence ("Ann is working out now: team sports"). Notify's activity
/// pushes show these, never the raw key; a key without a label (a community's own list) gets none, and the text
/// then says no activity. English is the fallback language, as everywhere (`LocalizedTexts`).
public enum ActivityLabels {
    private static let languages = LocalizedTexts<[String: String]>([
        "en": [
            "running": "running", "cycling": "cycling", "yoga": "yoga", "lifting": "weightlifting",
            "swimming": "swimming", "climbing": "climbing", "hiking": "hiking", "team_sports": "team sports",
        ],
        "fr": [
            "running": "course à pied", "cycling": "vélo", "yoga": "yoga", "lifting": "musculation",
            "swimming": "natation", "climbing": "escalade", "hiking": "randonnée", "team_sports": "sport collectif",
        ],
    ])

    /// The languages with labels of their own.
    public static var languageCodes: [String] { Self.languages.languageCodes }

    /// The label of activity `key` for a member in `locale` (a BCP 47 tag); nil for a key the preset does not list.
    public static func label(of key: String, locale: String?) -> String? {
        Self.languages.texts(for: locale)[key]
    }
}
