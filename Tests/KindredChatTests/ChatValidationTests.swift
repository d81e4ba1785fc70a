import KindredChat
import Testing

@Suite("Chat input rules")
struct ChatValidationTests {
    @Test(arguments: [
        ("hello", "hello"),
        ("  spaced out \n", "spaced out"),
        ("two\nlines", "two\nlines"),
        ("émoji 👋🏽", "émoji 👋🏽"),
        ("cr\r\nlf\r\n", "cr\nlf"),
    ])
    func acceptedBodies(input: String, stored: String) throws {
        #expect(try ChatValidation.body(input) == stored)
    }

    @Test(arguments: [
        ("", "BODY_EMPTY"),
        ("   \n ", "BODY_EMPTY"),
        ("tab\there", "BODY_CONTROL_CHARACTER"),
        ("bell\u{07}", "BODY_CONTROL_CHARACTER"),
        ("lone\rcr", "BODY_CONTROL_CHARACTER"),
        ("see \u{202E}gpj.exe", "BODY_CONTROL_CHARACTER"),
        ("esc \u{1b}[31m", "BODY_CONTROL_CHARACTER"),
        ("c1 \u{85} next line", "BODY_CONTROL_CHARACTER"),
        ("nul\u{0}", "BODY_CONTROL_CHARACTER"),
        (String(repeating: "a", count: 2001), "BODY_TOO_LONG"),
        ("a" + String(repeating: "\u{0301}", count: 100_000), "BODY_TOO_MANY_BYTES"),  // one character, 200 KB
        (String(repeating: "👋🏽", count: 1001), "BODY_TOO_MANY_BYTES"),
    ])
    func refusedBodies(input: String, reason: String) {
        #expect(throws: ChatError.self) { try ChatValidation.body(input) }
        do {
            _ = try ChatValidation.body(input)
        } catch {
            #expect(error.violations.first?.reason == reason)
        }
    }

    @Test func bodyLimitCountsCharactersAndBytes() throws {
        #expect(try ChatValidation.body(String(repeating: "é", count: 2000)).count == 2000)
        #expect(try ChatValidation.body(String(repeating: "👋🏽", count: 1000)).utf8.count == 8000)
    }

    @Test(arguments: ["a", "0f8fad5b-d9cb-469f-a165-70867728950e", "A_b-9", String(repeating: "x", count: 64)])
    func acceptedClientIDs(id: String) throws {
        #expect(try ChatValidation.clientMessageID(id) == id)
    }

    @Test(arguments: ["", "has space", "semi;colon", "ü", String(repeating: "x", count: 65)])
    func refusedClientIDs(id: String) {
        #expect(throws: ChatError.self) { try ChatValidation.clientMessageID(id) }
    }

    @Test(arguments: [(Int32(0), 50), (1, 1), (100, 100)])
    func pageSizes(value: Int32, expected: Int) throws {
        #expect(try ChatValidation.pageSize(value, default: 50) == expected)
    }

    @Test(arguments: [Int32(-1), 101])
    func refusedPageSizes(value: Int32) {
        #expect(throws: ChatError.self) { try ChatValidation.pageSize(value, default: 50) }
    }
}
