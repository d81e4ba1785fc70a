/// A service's texts per language, chosen by a member's locale: the BCP 47 tag's language subtag decides
/// ("fr-CA" and "fr_FR" read the French texts), and a locale without texts of its own — or no locale at all —
/// gets the fallback language's. `Texts` is whatever the service's templates are (closures filling in a name,
/// a link); this type only knows how to pick them. Notify's notification texts and auth's mails both use it, so
/// a member reads the same language in a push and in a mail.
public struct LocalizedTexts<Texts: Sendable>: Sendable {
    private let languages: [String: Texts]
    private let fallbackTexts: Texts
    /// The language used when the locale's has no texts (English in every service).
    public let fallback: String

    /// `languages` maps lowercase ISO 639 codes to their texts; it must hold `fallback`.
    public init(_ languages: [String: Texts], fallback: String = "en") {
        guard let texts = languages[fallback] else {
            preconditionFailure("LocalizedTexts: no texts for the fallback language \(fallback)")
        }
        self.languages = languages
        self.fallbackTexts = texts
        self.fallback = fallback
    }

    /// The languages with texts of their own, sorted.
    public var languageCodes: [String] { self.languages.keys.sorted() }

    /// The texts for `locale` (a BCP 47 tag such as "fr-CA", or a POSIX one such as "fr_FR"), else the fallback's.
    public func texts(for locale: String?) -> Texts {
        guard let code = Self.languageCode(of: locale) else { return self.fallbackTexts }
        return self.languages[code] ?? self.fallbackTexts
    }

    /// The language code a locale names, lowercased: the part before the first "-" or "_"; nil for an empty tag.
    public static func languageCode(of locale: String?) -> String? {
        guard let locale, let first = locale.split(whereSeparator: { $0 == "-" || $0 == "_" }).first else {
            return nil
        }
        let code = first.lowercased()
        return code.isEmpty ? nil : code
    }
}
