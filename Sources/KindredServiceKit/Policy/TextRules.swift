/// The limits of one text field a member (or an admin) writes, and the one validator every service checks such
/// text with. Two caps hold at once: characters (extended grapheme clusters, what a person sees and what the
/// contract's "1..500 characters" means) and UTF-8 bytes (what a row, an event batch and a 4 MiB list page carry).
/// One grapheme can hold any number of combining marks, so a character cap alone bounds nothing in bytes.
///
/// `validate` trims, normalises line breaks, and answers the stored string or a `TextViolation` naming the field,
/// which each service turns into INVALID_ARGUMENT with that field violation. No I/O; `TextRulesTests` tables
/// cover every edge (combining marks, emoji sequences, flags, CRLF, NUL, bidi controls, invalid UTF-8).
public struct TextRule: Sendable, Hashable {
    /// What the field is, which decides the characters it takes.
    public enum Kind: Sendable, Hashable {
        /// One line of prose (a job title, a city, a label, a note): no control characters, no line breaks.
        case line
        /// Prose over several lines (a bio, a message, report details): "\n" allowed, "\r\n" stored as "\n";
        /// every other control character refused.
        case text
        /// Shown as someone's or something's identity (display names, usernames, community names, interests): one
        /// line, and none of the invisible or direction-changing characters that make one name look like another
        /// (bidi embeddings, overrides, isolates and marks; zero-width spaces and joiners outside emoji; blank
        /// fillers), and at most `maxScalarsPerNameCharacter` code points in one character (stacked marks).
        case name
        /// A machine word (a swipe surface, a locale): printable ASCII without spaces.
        case token
    }

    public var kind: Kind
    /// Characters (grapheme clusters) after trimming: an empty string passes only when the range starts at 0.
    public var characters: ClosedRange<Int>
    /// UTF-8 bytes after trimming and normalisation.
    public var maxBytes: Int
    /// Leading and trailing white space (and line breaks) removed before the checks.
    public var trims: Bool

    /// A family emoji with skin tones is 11 code points, a subdivision flag 7: 16 leaves room for every emoji and
    /// for scripts that stack marks, and none for "Zalgo" towers that draw over the lines around a name.
    public static let maxScalarsPerNameCharacter = 16

    public init(_ kind: Kind, characters: ClosedRange<Int>, maxBytes: Int, trims: Bool = true) {
        self.kind = kind
        self.characters = characters
        self.maxBytes = maxBytes
        self.trims = trims
    }

    /// The limits as the hint of a violation: "1..500 characters, at most 2000 bytes".
    public var hint: String {
        "\(self.characters.lowerBound)..\(self.characters.upperBound) characters, at most \(self.maxBytes) bytes"
    }

    /// The text as stored (trimmed, "\r\n" → "\n" in `.text`), or the first rule it breaks.
    public func validate(_ raw: String, field: String) throws(TextViolation) -> String {
        var text = self.trims ? Self.trimmed(raw) : raw
        if self.kind == .text, text.utf8.contains(0x0d) { text = Self.unifyingLineBreaks(text) }
        if text.isEmpty {
            guard self.characters.lowerBound == 0 else { throw self.violation(field, .required, "required") }
            return text
        }
        // Characters are counted to one past the cap only: a long string is not broken into graphemes to its end.
        var count = 0
        for _ in text {
            count += 1
            if count > self.characters.upperBound { break }
        }
        guard count <= self.characters.upperBound else { throw self.violation(field, .tooLong, self.hint) }
        guard text.utf8.count <= self.maxBytes else { throw self.violation(field, .tooManyBytes, self.hint) }
        guard count >= self.characters.lowerBound else { throw self.violation(field, .tooShort, self.hint) }
        if let problem = self.forbiddenCharacter(in: text) { throw self.violation(field, .forbiddenCharacter, problem) }
        return text
    }

    /// `validate`, with a violation turned into the service's own error (`MatchError.init`, ...).
    public func validate<Failure: Error>(
        _ raw: String,
        field: String,
        as failure: (TextViolation) -> Failure
    ) throws(Failure) -> String {
        do throws(TextViolation) {
            return try self.validate(raw, field: field)
        } catch {
            throw failure(error)
        }
    }

    /// `validate` for bytes that have not been decoded yet: INVALID_UTF8 unless they are UTF-8. (Strings from
    /// the wire are already checked by the protobuf decoder, which answers INVALID_ARGUMENT for the message.)
    public func validate(utf8 bytes: some Collection<UInt8>, field: String) throws(TextViolation) -> String {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw self.violation(field, .invalidUTF8, "UTF-8 text")
        }
        return try self.validate(text, field: field)
    }

    /// `raw` cut to the rule's caps (whole characters), for values that are kept short rather than refused
    /// (a device name from a client's own description).
    public func truncating(_ raw: String) -> String {
        var kept = Substring(self.trims ? Self.trimmed(raw) : raw).prefix(self.characters.upperBound)
        while kept.utf8.count > self.maxBytes { kept = kept.dropLast() }
        return String(kept)
    }

    private func violation(_ field: String, _ reason: TextViolation.Reason, _ hint: String) -> TextViolation {
        TextViolation(field: field, reason: reason, hint: hint)
    }

    // MARK: Characters

    /// A hint naming the kind of character refused, or nil if every character is allowed.
    private func forbiddenCharacter(in text: String) -> String? {
        switch self.kind {
        case .token:
            return text.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7e }) ? nil : "printable ASCII without spaces"
        case .line, .text:
            for scalar in text.unicodeScalars {
                if scalar == "\n", self.kind == .text { continue }
                if Self.isControlOrLineBreak(scalar) {
                    return self.kind == .text
                        ? "no control characters except newline" : "one line, no control characters"
                }
                if Self.isBidiOverride(scalar) { return "no bidi override characters" }
            }
            return nil
        case .name:
            for character in text {
                if let problem = Self.nameProblem(character) { return problem }
            }
            return nil
        }
    }

    private static func nameProblem(_ character: Character) -> String? {
        let scalars = Array(character.unicodeScalars)
        if scalars.count > Self.maxScalarsPerNameCharacter { return "at most 16 code points in one character" }
        for (index, scalar) in scalars.enumerated() {
            if Self.isControlOrLineBreak(scalar) { return "one line, no control characters" }
            if scalar == "\u{200D}", Self.joinsEmoji(scalars, at: index) { continue }
            if (0xE0020...0xE007F).contains(scalar.value), scalars.first == "\u{1F3F4}" { continue }  // a flag's tags
            if scalar.properties.generalCategory == .format || Self.blankLetters.contains(scalar.value) {
                return "no invisible or direction-changing characters"
            }
        }
        return nil
    }

    /// A zero-width joiner between two emoji (skipping variation selectors and skin tones), as in 👩‍💻.
    private static func joinsEmoji(_ scalars: [Unicode.Scalar], at index: Int) -> Bool {
        func isEmoji(_ scalar: Unicode.Scalar) -> Bool { scalar.value >= 0x2000 && scalar.properties.isEmoji }
        func isDecoration(_ scalar: Unicode.Scalar) -> Bool {
            scalar == "\u{FE0F}" || (0x1F3FB...0x1F3FF).contains(scalar.value)
        }
        var before = index - 1
        while before >= 0, isDecoration(scalars[before]) { before -= 1 }
        return before >= 0 && isEmoji(scalars[before]) && index + 1 < scalars.count && isEmoji(scalars[index + 1])
    }

    /// Letters and marks that draw nothing, used for names that look empty or pad one name into another:
    /// combining grapheme joiner, Hangul fillers, Khmer inherent vowels, braille blank.
    private static let blankLetters: Set<UInt32> = [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2800, 0x3164, 0xFFA0]

    /// C0 and C1 controls (NUL, tab, CR, ESC, NEL...), DEL, and the line and paragraph separators.
    private static func isControlOrLineBreak(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }

    /// LRE, RLE, PDF, LRO, RLO: they reorder the text after them (and the UI around it) until closed; prose
    /// never needs them (marks and isolates say the same safely), spoofing does. Names refuse every bidi control.
    private static func isBidiOverride(_ scalar: Unicode.Scalar) -> Bool {
        (0x202A...0x202E).contains(scalar.value)
    }

    // MARK: Normalisation

    /// Without leading and trailing white space (Unicode White_Space, line breaks included).
    public static func trimmed(_ text: String) -> String {
        let scalars = text.unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
            let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        if first == scalars.startIndex, scalars.index(after: last) == scalars.endIndex { return text }
        return String(scalars[first...last])
    }

    /// "\r\n" as "\n" (a lone "\r" stays, and is refused as a control character).
    private static func unifyingLineBreaks(_ text: String) -> String {
        var result = String.UnicodeScalarView()
        var pendingCR = false
        for scalar in text.unicodeScalars {
            if pendingCR {
                pendingCR = false
                if scalar == "\n" {
                    result.append("\n")
                    continue
                }
                result.append("\r")
            }
            if scalar == "\r" { pendingCR = true } else { result.append(scalar) }
        }
        if pendingCR { result.append("\r") }
        return String(result)
    }
}

// MARK: The fields

/// Every member-written text field's rule, in one table, so the byte arithmetic of list pages
/// (services/README.md, "Limits") can be read off one place. Byte caps are four bytes a character: any text
/// of real letters fits, a tower of combining marks does not.
extension TextRule {
    /// A profile's display name.
    public static let displayName = TextRule(.name, characters: 1...50, maxBytes: 200)
    /// A profile's bio.
    public static let bio = TextRule(.text, characters: 0...500, maxBytes: 2000)
    /// A profile's job title or city.
    public static let jobOrCity = TextRule(.line, characters: 0...64, maxBytes: 256)
    /// One interest, before it is normalised to a word.
    public static let interest = TextRule(.name, characters: 1...24, maxBytes: 96)
    /// A TEXT attribute value whose definition allows `maxLength` characters (1..500).
    public static func attributeText(maxLength: Int) -> TextRule {
        TextRule(.line, characters: 1...maxLength, maxBytes: 4 * maxLength)
    }
    /// A community's display name.
    public static let communityName = TextRule(.name, characters: 1...64, maxBytes: 256)
    /// A label of an attribute definition or of one of its choices.
    public static let label = TextRule(.line, characters: 1...64, maxBytes: 256)
    /// A username as typed (before lower-casing): auth then requires [a-z0-9_.].
    public static let username = TextRule(.name, characters: 3...30, maxBytes: 30, trims: false)
    /// A chat message's body.
    public static let messageBody = TextRule(.text, characters: 1...2000, maxBytes: 8000)
    /// A report's details.
    public static let reportDetails = TextRule(.text, characters: 0...1000, maxBytes: 4000)
    /// An admin's note on a deactivation or reactivation.
    public static let adminNote = TextRule(.text, characters: 0...500, maxBytes: 2000)
    /// An admin's note on a resolved report.
    public static let resolutionNote = TextRule(.text, characters: 0...1000, maxBytes: 4000)
    /// Where a swipe's card was shown ("deck", "search"...).
    public static let surface = TextRule(.token, characters: 0...32, maxBytes: 32, trims: false)
    /// A BCP 47 locale tag.
    public static let locale = TextRule(.token, characters: 0...35, maxBytes: 35, trims: false)
    /// A session's device name as the client describes itself (cut, not refused).
    public static let deviceName = TextRule(.line, characters: 0...64, maxBytes: 256)
    /// A session's user agent as the client describes itself (cut, not refused).
    public static let userAgent = TextRule(.line, characters: 0...256, maxBytes: 1024)
}
