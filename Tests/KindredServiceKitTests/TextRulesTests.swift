import KindredServiceKit
import Testing

@Suite struct TextRulesTests {
    /// The reason `rule` gives `text`, or "OK:<stored text>" when it passes.
    static func outcome(_ rule: TextRule, _ text: String) -> String {
        do throws(TextViolation) {
            return "OK:" + (try rule.validate(text, field: "f"))
        } catch {
            #expect(error.field == "f" && error.fieldViolation.field == "f")
            #expect(error.fieldViolation.reason == error.reason.code)
            return error.reason.code
        }
    }

    static let combining = "a" + String(repeating: "\u{0301}", count: 20_000)  // one character, 40,001 bytes
    static let family = "👨‍👩‍👧‍👦"  // one character: 4 emoji joined by 3 ZWJ, 25 bytes
    static let technologist = "👩🏽‍💻"  // woman, skin tone, ZWJ, laptop
    static let france = "🇫🇷"  // one character: two regional indicators, 8 bytes
    static let scotland = "🏴\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}"  // a flag tag sequence

    @Test(
        arguments: [
            // The reported bio: one grapheme of 20,000 combining marks.
            (TextRule.bio, combining, "TOO_MANY_BYTES"),
            // Exactly at the character cap, and one over.
            (TextRule.bio, String(repeating: "a", count: 500), "OK"),
            (TextRule.bio, String(repeating: "a", count: 501), "TOO_LONG"),
            // Exactly at the byte cap with fewer characters (500 × 4-byte emoji = 2,000 bytes), and one byte over.
            (TextRule.bio, String(repeating: "😀", count: 500), "OK"),
            (TextRule.bio, String(repeating: "😀", count: 499) + "é\u{0301}\u{0301}", "TOO_MANY_BYTES"),
            // Over both: the characters are named (the cause a person can fix).
            (TextRule.bio, String(repeating: "a", count: 3000), "TOO_LONG"),
            // Emoji sequences and flags count as one character each, in every kind.
            (TextRule.bio, String(repeating: family, count: 80), "OK"),  // 80 characters, 2,000 bytes
            (TextRule.bio, String(repeating: family, count: 81), "TOO_MANY_BYTES"),
            (TextRule.displayName, "Ada " + family + " " + france + " " + scotland + " " + technologist, "OK"),
            (TextRule.displayName, String(repeating: france, count: 25), "OK"),  // 25 characters, 200 bytes
            (TextRule.displayName, String(repeating: france, count: 25) + "x", "TOO_MANY_BYTES"),
            (TextRule.displayName, String(repeating: "n", count: 50), "OK"),
            (TextRule.displayName, String(repeating: "n", count: 51), "TOO_LONG"),
            // Required, trimmed.
            (TextRule.displayName, "", "REQUIRED"),
            (TextRule.displayName, " \n\t\u{3000}", "REQUIRED"),
            (TextRule.messageBody, "   \n ", "REQUIRED"),
            (TextRule.bio, "", "OK"),
            (TextRule.username, "ab", "TOO_SHORT"),
            // Control characters: NUL, tab, ESC, DEL, C1 (NEL), line and paragraph separators.
            (TextRule.bio, "nul\u{0}here", "FORBIDDEN_CHARACTER"),
            (TextRule.displayName, "nul\u{0}", "FORBIDDEN_CHARACTER"),
            (TextRule.messageBody, "tab\there", "FORBIDDEN_CHARACTER"),
            (TextRule.messageBody, "esc \u{1b}[31m red", "FORBIDDEN_CHARACTER"),
            (TextRule.messageBody, "del\u{7f}", "FORBIDDEN_CHARACTER"),
            (TextRule.messageBody, "c1 \u{85} next line", "FORBIDDEN_CHARACTER"),
            (TextRule.jobOrCity, "line\u{2028}separator", "FORBIDDEN_CHARACTER"),
            // Line breaks: kept in prose (CRLF stored as LF), refused in one-line fields and names; a lone CR refused.
            (TextRule.messageBody, "one\r\ntwo\nthree", "OK:one\ntwo\nthree"),
            (TextRule.messageBody, "\r\n hi \r\n", "OK:hi"),
            (TextRule.messageBody, "old mac\rline", "FORBIDDEN_CHARACTER"),
            (TextRule.messageBody, "ends in cr\rx", "FORBIDDEN_CHARACTER"),
            (TextRule.jobOrCity, "two\nlines", "FORBIDDEN_CHARACTER"),
            (TextRule.displayName, "Ada\r\nLovelace", "FORBIDDEN_CHARACTER"),
            // Bidi overrides anywhere; every bidi control and zero-width character in names.
            (TextRule.messageBody, "see \u{202E}gpj.exe", "FORBIDDEN_CHARACTER"),
            (TextRule.jobOrCity, "\u{202D}CEO", "FORBIDDEN_CHARACTER"),
            (TextRule.messageBody, "شكرا \u{2067}Ada\u{2069} \u{200F}!", "OK:شكرا \u{2067}Ada\u{2069} \u{200F}!"),
            (
                TextRule.messageBody, "zero\u{200B}width and ZWNJ می\u{200C}خواهم",
                "OK:zero\u{200B}width and ZWNJ می\u{200C}خواهم"
            ),
            (TextRule.displayName, "Ada\u{202E}ecalevol", "FORBIDDEN_CHARACTER"),
            (TextRule.displayName, "\u{2066}Ada\u{2069}", "FORBIDDEN_CHARACTER"),
            (TextRule.displayName, "Ada\u{200E}", "FORBIDDEN_CHARACTER"),
            (TextRule.displayName, "Ad\u{200B}a", "FORBIDDEN_CHARACTER"),
            (TextRule.displayName, "Ad\u{200C}a", "FORBIDDEN_CHARACTER"),
            (TextRule.displayName, "Ad\u{200D}a", "FORBIDDEN_CHARACTER"),
            (TextRule.displayName, "Ad\u{2060}a", "FORBIDDEN_CHARACTER"),
            (TextRule.displayName, "\u{FEFF}Ada", "FORBIDDEN_CHARACTER"),
            (TextRule.displayName, "Ada\u{00AD}", "FORBIDDEN_CHARACTER"),  // soft hyphen
            (TextRule.displayName, "\u{3164}", "FORBIDDEN_CHARACTER"),  // Hangul filler: a name that looks empty
            (TextRule.displayName, "a\u{200D}" + france, "FORBIDDEN_CHARACTER"),  // ZWJ after a letter
            (TextRule.displayName, "\u{E0067}\u{E0062}", "FORBIDDEN_CHARACTER"),  // tags outside a flag
            (TextRule.displayName, "Zoe\u{0308}", "OK:Zoe\u{0308}"),
            (TextRule.displayName, "Ngu\u{1EC5}n Th\u{1ECB}", "OK:Ngu\u{1EC5}n Th\u{1ECB}"),
            (TextRule.displayName, "e" + String(repeating: "\u{0301}", count: 16), "FORBIDDEN_CHARACTER"),  // 17 points
            (
                TextRule.displayName, "e" + String(repeating: "\u{0301}", count: 15),
                "OK:e" + String(repeating: "\u{0301}", count: 15)
            ),
            // Tokens: printable ASCII only, bytes and characters the same.
            (TextRule.surface, "deck", "OK:deck"),
            (TextRule.surface, "", "OK:"),
            (TextRule.surface, String(repeating: "s", count: 32), "OK"),
            (TextRule.surface, String(repeating: "s", count: 33), "TOO_LONG"),
            (TextRule.surface, String(repeating: "s", count: 10_240), "TOO_LONG"),
            (TextRule.surface, "d" + String(repeating: "\u{0301}", count: 5000), "TOO_MANY_BYTES"),
            (TextRule.surface, "déck", "FORBIDDEN_CHARACTER"),
            (TextRule.surface, "two words", "FORBIDDEN_CHARACTER"),
            // Usernames (not trimmed; auth then requires [a-z0-9_.]).
            (TextRule.username, "ada\u{200B}", "FORBIDDEN_CHARACTER"),
            (TextRule.username, String(repeating: "é", count: 16), "TOO_MANY_BYTES"),  // 16 characters, 32 bytes
        ] as [(TextRule, String, String)]
    )
    func table(rule: TextRule, text: String, expected: String) {
        let got = Self.outcome(rule, text)
        if expected == "OK" {
            #expect(got.hasPrefix("OK:"), "\(text.unicodeScalars.count) scalars")
        } else {
            #expect(got == expected, "\(text.unicodeScalars.count) scalars")
        }
    }

    @Test func storedTextIsTrimmed() throws {
        #expect(try TextRule.bio.validate("  \n hello\nthere \t\n", field: "bio") == "hello\nthere")
        #expect(try TextRule.displayName.validate("\u{00A0}Ada\u{3000}", field: "name") == "Ada")
    }

    @Test(
        arguments: [
            [0xff, 0xfe],  // never UTF-8
            [0x61, 0xc3],  // a truncated two-byte sequence
            [0xed, 0xa0, 0x80],  // a UTF-16 surrogate
            [0xc0, 0xaf],  // an overlong "/"
            [0xf4, 0x90, 0x80, 0x80],  // above U+10FFFF
        ] as [[UInt8]]
    )
    func invalidUTF8IsRefused(bytes: [UInt8]) {
        #expect(throws: TextViolation(field: "bio", reason: .invalidUTF8, hint: "UTF-8 text")) {
            try TextRule.bio.validate(utf8: bytes, field: "bio")
        }
    }

    @Test func validUTF8BytesAreValidatedAsText() throws {
        #expect(try TextRule.bio.validate(utf8: Array(" héllo ".utf8), field: "bio") == "héllo")
        #expect(throws: TextViolation.self) {
            try TextRule.bio.validate(utf8: Array(Self.combining.utf8), field: "bio")
        }
    }

    @Test func violationsNameTheLimitsNotTheText() {
        do throws(TextViolation) {
            _ = try TextRule.bio.validate(Self.combining, field: "fields.bio")
            Issue.record("accepted")
        } catch {
            #expect(error.fieldViolation.field == "fields.bio")
            #expect(error.fieldViolation.reason == "TOO_MANY_BYTES")
            #expect(error.fieldViolation.hint == "0..500 characters, at most 2000 bytes")
        }
    }

    @Test func truncatingCutsWholeCharactersToBothCaps() {
        #expect(TextRule.deviceName.truncating(String(repeating: "d", count: 100)) == String(repeating: "d", count: 64))
        let cut = TextRule.deviceName.truncating(String(repeating: Self.combining, count: 3))
        #expect(cut.isEmpty)  // one character of 40 KB cannot be cut in half
        let flags = TextRule.deviceName.truncating(String(repeating: Self.france, count: 64))
        #expect(flags.utf8.count <= 256 && flags.count == 32)
    }

    /// Every rule's byte cap covers its character cap at one byte a character (so ASCII always fits) and
    /// stays within four bytes a character (the arithmetic of services/README.md "Limits").
    @Test(arguments: [
        TextRule.displayName, .bio, .jobOrCity, .interest, .communityName, .label, .username, .messageBody,
        .reportDetails, .adminNote, .surface, .locale, .deviceName, .userAgent, .attributeText(maxLength: 500),
    ])
    func byteCapsFitTheCharacterCaps(rule: TextRule) {
        #expect(rule.maxBytes >= rule.characters.upperBound && rule.maxBytes <= 4 * rule.characters.upperBound)
    }
}
