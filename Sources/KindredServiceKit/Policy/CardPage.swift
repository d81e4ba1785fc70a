/// How many profile cards one list page may carry so that no page can pass gRPC's 4 MiB message limit, whatever
/// the members wrote: every text field has a byte cap (`TextRule`), a profile's fields together at most
/// `maxProfileFieldsBytes`, a card at most `maxCardBytes` with its photos, and a page at most `maxCards` cards with
/// a last message each. `CardPageTests` checks the sum; services/README.md ("Limits") shows it.
public enum CardPage {
    /// The gRPC message limit the pages must stay under (DESIGN §6).
    public static let messageLimitBytes = 4 * 1024 * 1024

    /// A profile's fields together, encoded (checked on CreateProfile and UpdateProfile).
    public static let maxProfileFieldsBytes = 16_384

    /// A media base URL's bytes (KINDRED_PROFILE_MEDIA_BASE_URL): photo URLs are most of a card.
    public static let maxMediaBaseURLBytes = 256

    /// One photo on a card: id, position, version, size, and 8 signed URLs (4 variants × 2 formats) of at most
    /// the base URL + 136 bytes (`/media/v1/<36>/<version ≤ 19>/<v>.webp?exp=<10>&sig=<43>`) + 24 of framing.
    public static let maxPhotoBytes = 8 * (maxMediaBaseURLBytes + 136 + 24) + 80

    /// One card: the fields, 9 photos, and 256 bytes of ids, numbers and framing (a deck card's 10 shared
    /// attribute keys included).
    public static let maxCardBytes = maxProfileFieldsBytes + 9 * maxPhotoBytes + 256 + 10 * 34

    /// A chat message as a list item carries it (a thread's or a match's last message): body, ids, times.
    public static let maxMessageBytes = TextRule.messageBody.maxBytes + 256

    /// Where a list that is cut by bytes stops (profile's index pages, whose snapshots carry attributes): a page
    /// ends before the entry that would take it past 3 MiB, leaving room for framing under the 4 MiB limit.
    public static let maxPageBytes = 3 * 1024 * 1024

    /// Cards on one page of a list that carries them (deck, search, matches, likes received, chat threads):
    /// requests for more get this many and a next-page token.
    public static let maxCards = 50
}
