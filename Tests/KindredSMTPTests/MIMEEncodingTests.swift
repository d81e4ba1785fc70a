import Foundation
import Testing

@testable import KindredSMTP

@Suite struct MIMEEncodingTests {
    private func string(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test(arguments: [
        ("a\nb\rc\r\nd", "a\r\nb\r\nc\r\nd"),
        ("\n\n", "\r\n\r\n"),
        ("\r\r\n", "\r\n\r\n"),
        ("end\r\n", "end\r\n"),
        ("", ""),
    ])
    func lineEndingsBecomeCRLF(input: String, expected: String) {
        #expect(self.string(MIMEEncoding.normalizedLines(input)) == expected)
    }

    @Test(arguments: [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),  // RFC 4648 §10
    ])
    func base64Vectors(input: String, expected: String) {
        #expect(MIMEEncoding.base64(input) == expected)
    }

    @Test(arguments: [
        ("plain text\r\n", "plain text\r\n"),
        ("a=b\r\n", "a=3Db\r\n"),
        ("café\r\n", "caf=C3=A9\r\n"),
        ("trailing space \r\nand tab\t\r\n", "trailing space=20\r\nand tab=09\r\n"),
        ("no final newline ", "no final newline=20"),
        ("\r\n\r\n", "\r\n\r\n"),
    ])
    func quotedPrintable(input: String, expected: String) {
        #expect(self.string(MIMEEncoding.quotedPrintable(Array(input.utf8))) == expected)
    }

    @Test func quotedPrintableSoftBreaksKeepLinesWithin76() {
        let line = String(repeating: "ab=cdé ", count: 60) + "end"
        let encoded = self.string(MIMEEncoding.quotedPrintable(MIMEEncoding.normalizedLines(line + "\n" + line)))
        let lines = encoded.components(separatedBy: "\r\n")
        #expect(lines.count > 10)
        #expect(lines.allSatisfy { $0.utf8.count <= 76 })
        // Decoding (remove soft breaks, then =XX) gives back the input.
        #expect(Self.decodeQuotedPrintable(encoded) == line + "\r\n" + line)
    }

    @Test func quotedPrintableLineOfExactly76() {
        let line = String(repeating: "x", count: 76)
        #expect(self.string(MIMEEncoding.quotedPrintable(Array(line.utf8))) == line)
        let longer = String(repeating: "x", count: 77)
        #expect(
            self.string(MIMEEncoding.quotedPrintable(Array(longer.utf8))) == String(repeating: "x", count: 75)
                + "=\r\nxx"
        )
    }

    static func decodeQuotedPrintable(_ text: String) -> String {
        let joined = Array(text.replacingOccurrences(of: "=\r\n", with: "").utf8)
        var bytes: [UInt8] = []
        var index = 0
        while index < joined.count {
            if joined[index] == UInt8(ascii: "="), index + 2 < joined.count,
                let value = UInt8(String(decoding: joined[index + 1...index + 2], as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                index += 3
            } else {
                bytes.append(joined[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Decodes one encoded-word; nil if it is not valid UTF-8 on its own.
    static func decodeEncodedWord(_ word: String) -> String? {
        let parts = word.split(separator: "?", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0] == "=", parts[1] == "UTF-8", parts[4] == "=" else { return nil }
        let bytes: [UInt8]
        if parts[2] == "B" {
            guard let data = Data(base64Encoded: String(parts[3])) else { return nil }
            bytes = Array(data)
        } else {
            bytes = Array(Self.decodeQuotedPrintable(parts[3].replacingOccurrences(of: "_", with: " ")).utf8)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    @Test(arguments: [
        "Grüße",
        "Café au lait, s'il vous plaît — merci beaucoup pour votre inscription chez Kindred!",
        "山田太郎さん、ようこそ。メールアドレスを確認してください。確認コードは二十四時間有効です。",
        "emoji 💘👩‍❤️‍👨 family",
        "=?UTF-8?Q?looks_encoded?= but is not",
    ])
    func encodedWordsRoundTripAndStayShort(text: String) {
        let words = MIMEEncoding.encodedWords(text, firstLength: 60)
        #expect(!words.isEmpty)
        #expect(words[0].utf8.count <= 60)
        #expect(words.allSatisfy { $0.utf8.count <= 75 })
        // Each word decodes on its own: no character is split between words.
        let decoded = words.map { Self.decodeEncodedWord($0) }
        #expect(decoded.allSatisfy { $0 != nil })
        #expect(decoded.compactMap { $0 }.joined() == text)
    }

    @Test func theShorterOfQAndBIsUsed() {
        #expect(MIMEEncoding.encodedWords("Café au lait") == ["=?UTF-8?Q?Caf=C3=A9_au_lait?="])
        #expect(MIMEEncoding.encodedWords("Grüße") == ["=?UTF-8?B?R3LDvMOfZQ==?="])
        #expect(MIMEEncoding.encodedWords("山田") == ["=?UTF-8?B?5bGx55Sw?="])
    }

    @Test(arguments: [
        "Rendez-vous au café du Parc, Zoë (Paris)", "Le \"Bon\" café, Paris (centre-ville) près de la gare",
    ])
    func qEncodedWordsAreSafeInPhrases(text: String) {
        // RFC 2047 §5(3): in a phrase, only letters, digits and !*+-/=_ may appear in Q text.
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!*+-/=_")
        for word in MIMEEncoding.encodedWords(text) {
            #expect(word.hasPrefix("=?UTF-8?Q?"), "expected Q for \(text)")
            #expect(word.dropFirst(10).dropLast(2).allSatisfy { allowed.contains($0) }, "\(word)")
        }
    }

    @Test func subjectFoldsAt78Columns() {
        let ascii = MIMEEncoding.unstructuredHeader(
            name: "Subject",
            value: "Please verify the email address for your new Kindred account within the next 24 hours"
        )
        // "\r\n" is one Character: dropLast() removes the final CRLF.
        #expect(ascii.hasSuffix("\r\n"))
        let lines = ascii.dropLast().components(separatedBy: "\r\n")
        #expect(lines.count == 2)
        #expect(lines.allSatisfy { $0.utf8.count <= 78 })
        #expect(lines[1].hasPrefix(" "))
        // Unfolding (removing CRLF) restores the value.
        #expect(
            ascii.dropLast().replacingOccurrences(of: "\r\n", with: "").dropFirst("Subject: ".count)
                == "Please verify the email address for your new Kindred account within the next 24 hours"
        )

        let encoded = MIMEEncoding.unstructuredHeader(name: "Subject", value: String(repeating: "Grüße ", count: 20))
        #expect(encoded.dropLast().components(separatedBy: "\r\n").allSatisfy { $0.utf8.count <= 78 })
    }

    @Test func displayNames() {
        #expect(MIMEEncoding.phraseTokens("Ada Lovelace", firstLength: 70) == ["Ada", "Lovelace"])
        #expect(MIMEEncoding.phraseTokens("Doe, John", firstLength: 70) == ["\"Doe, John\""])
        #expect(MIMEEncoding.phraseTokens("a \"b\" \\c", firstLength: 70) == ["\"a \\\"b\\\" \\\\c\""])
        #expect(MIMEEncoding.phraseTokens("Jörg", firstLength: 70) == ["=?UTF-8?B?SsO2cmc=?="])
        #expect(MIMEEncoding.phraseTokens("Zoë Dupont", firstLength: 70) == ["=?UTF-8?Q?Zo=C3=AB_Dupont?="])
    }

    @Test(arguments: [
        ("Hello\r\n", "Hello\r\n.\r\n"),
        ("Hello", "Hello\r\n.\r\n"),
        (".\r\n", "..\r\n.\r\n"),
        ("a\r\n.b\r\n..c\r\nd.\r\n", "a\r\n..b\r\n...c\r\nd.\r\n.\r\n"),
        ("", ".\r\n"),
    ])
    func dotStuffing(content: String, expected: String) {
        #expect(self.string(MIMEEncoding.dotStuffed(Array(content.utf8))) == expected)
    }

    @Test(arguments: [
        (0.0, "Thu, 01 Jan 1970 00:00:00 +0000"),
        (951_782_400, "Tue, 29 Feb 2000 00:00:00 +0000"),
        (1_709_251_199.9, "Thu, 29 Feb 2024 23:59:59 +0000"),
        (1_767_225_600, "Thu, 01 Jan 2026 00:00:00 +0000"),
        (-1, "Wed, 31 Dec 1969 23:59:59 +0000"),
        (4_102_444_800, "Fri, 01 Jan 2100 00:00:00 +0000"),
    ])
    func rfc5322Dates(seconds: Double, expected: String) {
        #expect(SMTPMessage.rfc5322Date(Date(timeIntervalSince1970: seconds)) == expected)
    }

    @Test func transferEncodingChoice() {
        #expect(MIMEEncoding.transferEncoding(for: Array("hi\r\n".utf8), allowSevenBit: true) == .sevenBit)
        #expect(MIMEEncoding.transferEncoding(for: Array("hi\r\n".utf8), allowSevenBit: false) == .quotedPrintable)
        #expect(MIMEEncoding.transferEncoding(for: Array("schön\r\n".utf8), allowSevenBit: true) == .quotedPrintable)
        #expect(MIMEEncoding.transferEncoding(for: Array("確認してください\r\n".utf8), allowSevenBit: true) == .base64)
        let long = Array((String(repeating: "a", count: 999) + "\r\n").utf8)
        #expect(MIMEEncoding.transferEncoding(for: long, allowSevenBit: true) == .quotedPrintable)
    }
}
