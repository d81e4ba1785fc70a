/// The byte-level encodings of an Internet message: line endings (RFC 5322), quoted-printable and
/// base64 (RFC 2045), encoded-words (RFC 2047), header folding and SMTP dot-stuffing (RFC 5321).
enum MIMEEncoding {
    static let crlf: [UInt8] = [0x0D, 0x0A]
    /// RFC 5322 §2.1.1: lines SHOULD be at most 78 characters.
    static let preferredLineLength = 78
    /// RFC 5322 §2.1.1: lines MUST be at most 998 characters.
    static let maximumLineLength = 998

    // MARK: Line endings

    /// `text` as UTF-8 with every CRLF, lone CR and lone LF turned into CRLF.
    static func normalizedLines(_ text: String) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count + 16)
        var previousWasCR = false
        for byte in text.utf8 {
            switch byte {
            case 0x0D:
                output += Self.crlf
                previousWasCR = true
            case 0x0A:
                if !previousWasCR { output += Self.crlf }
                previousWasCR = false
            default:
                output.append(byte)
                previousWasCR = false
            }
        }
        return output
    }

    /// Splits CRLF-normalized bytes into lines (without their CRLF). A final CRLF does not start
    /// another line.
    static func lines(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if bytes[index] == 0x0D, index + 1 < bytes.endIndex, bytes[index + 1] == 0x0A {
                lines.append(bytes[start..<index])
                index += 2
                start = index
            } else {
                index += 1
            }
        }
        if start < bytes.endIndex { lines.append(bytes[start...]) }
        return lines
    }

    // MARK: Content-Transfer-Encoding

    enum TransferEncoding: String, Sendable {
        case sevenBit = "7bit"
        case quotedPrintable = "quoted-printable"
        case base64 = "base64"
    }

    /// The encoding for a CRLF-normalized text body: 7bit when allowed and plain ASCII with
    /// short-enough lines, else quoted-printable for mostly-ASCII text, base64 for the rest.
    static func transferEncoding(for body: [UInt8], allowSevenBit: Bool) -> TransferEncoding {
        let nonASCII = body.lazy.filter { $0 >= 0x80 }.count
        let controls = body.lazy.filter { $0 < 0x20 && $0 != 0x09 && $0 != 0x0D && $0 != 0x0A }.count
        if allowSevenBit, nonASCII == 0, controls == 0,
            Self.lines(body).allSatisfy({ $0.count <= Self.maximumLineLength })
        {
            return .sevenBit
        }
        // Quoted-printable triples each non-ASCII byte; base64 costs a third on everything.
        return (nonASCII + controls) * 3 > body.count ? .base64 : .quotedPrintable
    }

    static func encode(_ body: [UInt8], as encoding: TransferEncoding) -> [UInt8] {
        switch encoding {
        case .sevenBit: body
        case .quotedPrintable: Self.quotedPrintable(body)
        case .base64: Self.base64Lines(body)
        }
    }

    /// RFC 2045 §6.7 quoted-printable of CRLF-normalized text: hard line breaks stay CRLF, output
    /// lines are at most 76 characters (soft breaks end in "="), whitespace before a line end is
    /// encoded.
    static func quotedPrintable(_ body: [UInt8]) -> [UInt8] {
        let maximum = 76
        var output: [UInt8] = []
        output.reserveCapacity(body.count + body.count / 8)
        let lines = Self.lines(body)
        for (lineNumber, line) in lines.enumerated() {
            var length = 0
            for index in line.indices {
                let byte = line[index]
                let isLast = index == line.index(before: line.endIndex)
                let literal: Bool
                switch byte {
                case 0x09, 0x20: literal = !isLast
                case 0x21...0x7E: literal = byte != UInt8(ascii: "=")
                default: literal = false
                }
                let width = literal ? 1 : 3
                // A soft break needs one column for its "=", except after the line's last token.
                if length + width > (isLast ? maximum : maximum - 1) {
                    output += [UInt8(ascii: "=")] + Self.crlf
                    length = 0
                }
                if literal {
                    output.append(byte)
                } else {
                    output += [UInt8(ascii: "="), Self.hexDigits[Int(byte >> 4)], Self.hexDigits[Int(byte & 0x0F)]]
                }
                length += width
            }
            if lineNumber < lines.count - 1 || body.last == 0x0A {
                output += Self.crlf
            }
        }
        return output
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)
    private static let base64Alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Standard base64 with padding, on one line.
    static func base64(_ bytes: some Collection<UInt8>) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var iterator = bytes.makeIterator()
        while let first = iterator.next() {
            let second = iterator.next()
            let third = iterator.next()
            let group = UInt32(first) << 16 | UInt32(second ?? 0) << 8 | UInt32(third ?? 0)
            output.append(Self.base64Alphabet[Int(group >> 18 & 0x3F)])
            output.append(Self.base64Alphabet[Int(group >> 12 & 0x3F)])
            output.append(second == nil ? UInt8(ascii: "=") : Self.base64Alphabet[Int(group >> 6 & 0x3F)])
            output.append(third == nil ? UInt8(ascii: "=") : Self.base64Alphabet[Int(group & 0x3F)])
        }
        return output
    }

    static func base64(_ text: String) -> String {
        String(decoding: Self.base64(Array(text.utf8)), as: UTF8.self)
    }

    /// Base64 in lines of 76 characters, each ending in CRLF (RFC 2045 §6.8).
    static func base64Lines(_ bytes: [UInt8]) -> [UInt8] {
        let encoded = Self.base64(bytes)
        var output: [UInt8] = []
        output.reserveCapacity(encoded.count + encoded.count / 38 + 2)
        var start = 0
        while start < encoded.count {
            let end = min(start + 76, encoded.count)
            output += encoded[start..<end]
            output += Self.crlf
            start = end
        }
        return output
    }

    // MARK: Header values

    /// Characters RFC 2047 §5(3) allows unencoded in a "Q" encoded-word anywhere, phrases included.
    private static func isQSafe(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "!"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "/"):
            true
        default:
            false
        }
    }

    private static func qEncoded(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        var output: [UInt8] = []
        for byte in bytes {
            if Self.isQSafe(byte) {
                output.append(byte)
            } else if byte == 0x20 {
                output.append(UInt8(ascii: "_"))
            } else {
                output += [UInt8(ascii: "="), Self.hexDigits[Int(byte >> 4)], Self.hexDigits[Int(byte & 0x0F)]]
            }
        }
        return output
    }

    /// `text` as RFC 2047 encoded-words in UTF-8, each at most 75 characters and never splitting
    /// a character. The first is at most `firstLength` long so that it fits after the header
    /// name. "Q" when that is shorter than "B" (mostly-Latin text), else "B".
    static func encodedWords(_ text: String, firstLength: Int = 75) -> [String] {
        let overhead = "=?UTF-8?Q??=".utf8.count
        let characters = text.map { Array(String($0).utf8) }
        let allBytes = characters.flatMap { $0 }
        let useQ = Self.qEncoded(allBytes).count <= (allBytes.count + 2) / 3 * 4

        var words: [String] = []
        var chunk: [UInt8] = []
        var chunkQLength = 0
        func flush() {
            guard !chunk.isEmpty else { return }
            let payload = useQ ? Self.qEncoded(chunk) : Self.base64(chunk)
            words.append((useQ ? "=?UTF-8?Q?" : "=?UTF-8?B?") + String(decoding: payload, as: UTF8.self) + "?=")
            chunk = []
            chunkQLength = 0
        }
        for character in characters {
            let limit = (words.isEmpty ? max(firstLength, 24) : 75) - overhead
            let qLength = Self.qEncoded(character).count
            let length = useQ ? chunkQLength + qLength : (chunk.count + character.count + 2) / 3 * 4
            if length > limit, !chunk.isEmpty {
                flush()
            }
            chunk += character
            chunkQLength += qLength
        }
        flush()
        return words
    }

    /// Whether an unstructured value must be sent as encoded-words: it has non-ASCII, something
    /// that a reader would take for an encoded-word, or a word too long to fold.
    static func needsEncodedWords(_ value: String) -> Bool {
        value.utf8.contains { $0 >= 0x80 } || value.contains("=?")
            || value.split(separator: " ").contains { $0.utf8.count > 900 }
    }

    /// `name: tokens` with the tokens separated by single spaces, folded (CRLF before a space)
    /// so that lines stay within 78 characters where the tokens allow. The result ends in CRLF.
    static func foldedHeader(name: String, tokens: [String]) -> String {
        var output = name + ":"
        var lineLength = output.utf8.count
        var lineHasContent = false
        for token in tokens {
            let width = token.utf8.count
            if lineHasContent, !token.isEmpty, lineLength + 1 + width > Self.preferredLineLength {
                output += "\r\n"
                lineLength = 0
                lineHasContent = false
            }
            output += " " + token
            lineLength += 1 + width
            lineHasContent = lineHasContent || !token.isEmpty
        }
        return output + "\r\n"
    }

    /// An unstructured header (Subject, extra headers), encoded and folded.
    static func unstructuredHeader(name: String, value: String) -> String {
        if Self.needsEncodedWords(value) {
            let firstLength = Self.preferredLineLength - name.utf8.count - 2
            return Self.foldedHeader(name: name, tokens: Self.encodedWords(value, firstLength: firstLength))
        }
        return Self.foldedHeader(
            name: name,
            tokens: value.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        )
    }

    /// RFC 5322 §3.2.3 atext: what a display name may hold without quotes (plus spaces).
    private static func isAtext(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-/=?^_`{|}~".utf8.contains(byte)
        }
    }

    /// A display name as header tokens: atoms as they are, other ASCII as a quoted-string,
    /// non-ASCII as encoded-words (RFC 2047 §5(3)).
    static func phraseTokens(_ name: String, firstLength: Int) -> [String] {
        if Self.needsEncodedWords(name) {
            return Self.encodedWords(name, firstLength: firstLength)
        }
        let words = name.split(separator: " ", omittingEmptySubsequences: true)
        if words.allSatisfy({ $0.utf8.allSatisfy(Self.isAtext) }) {
            return words.map(String.init)
        }
        var quoted = "\""
        for character in name {
            if character == "\"" || character == "\\" { quoted.append("\\") }
            quoted.append(character)
        }
        return [quoted + "\""]
    }

    // MARK: SMTP

    /// The DATA payload (RFC 5321 §4.5.2): `content` with a "." doubled at the start of each line,
    /// ending in CRLF, then the terminating ".\r\n".
    static func dotStuffed(_ content: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(content.count + content.count / 64 + 5)
        var atLineStart = true
        for byte in content {
            if atLineStart, byte == UInt8(ascii: ".") { output.append(byte) }
            output.append(byte)
            atLineStart = byte == 0x0A
        }
        if !atLineStart { output += Self.crlf }
        output += Array(".\r\n".utf8)
        return output
    }
}
