import KindredProto
import KindredProtoJSON
import KindredProtobuf
import Testing

/// The message `json` denotes, through `ProtoJSON` and the generated binary decoder.
func parse<M: ProtoMessage>(_ json: String, as type: M.Type) throws -> M {
    try M(serializedBytes: try ProtoJSON.binary(fromJSON: Array(json.utf8), of: type))
}

/// The error `ProtoJSON` gives for `json`, or nil when it accepts it.
func refusal(_ json: String, as type: any ProtoMessage.Type) -> String? {
    do {
        _ = try ProtoJSON.binary(fromJSON: Array(json.utf8), of: type)
        return nil
    } catch {
        return error.message
    }
}

/// JSON → binary: one row per rule of the mapping's input side.
@Suite struct ProtoJSONInputTests {
    struct Row: CustomTestStringConvertible, Sendable {
        let rule: String
        let json: String
        let expected: Scalars
        var testDescription: String { rule }
    }

    static let acceptedRows: [Row] = [
        Row(rule: "empty object", json: "{}", expected: Scalars()),
        Row(rule: "whitespace anywhere", json: " \n{ \"int32Value\" :\t7 } \r\n", expected: .with { $0.int32Value = 7 }),
        Row(rule: "JSON names", json: #"{"int32Value":1,"boolValue":true}"#, expected: .with { $0.int32Value = 1; $0.boolValue = true }),
        Row(rule: "proto names", json: #"{"int32_value":1,"string_value":"s"}"#, expected: .with { $0.int32Value = 1; $0.stringValue = "s" }),
        Row(rule: "64-bit integers as strings or numbers", json: #"{"int64Value":"-9223372036854775808","uint64Value":18446744073709551615,"sint64Value":"-3","fixed64Value":"1","sfixed64Value":-2}"#,
            expected: .with { $0.int64Value = .min; $0.uint64Value = .max; $0.sint64Value = -3; $0.fixed64Value = 1; $0.sfixed64Value = -2 }),
        Row(rule: "32-bit integers as strings", json: #"{"int32Value":"-5","uint32Value":"4294967295","fixed32Value":"3","sfixed32Value":"-4","sint32Value":"9"}"#,
            expected: .with { $0.int32Value = -5; $0.uint32Value = .max; $0.fixed32Value = 3; $0.sfixed32Value = -4; $0.sint32Value = 9 }),
        Row(rule: "integers in exponent or fraction form when exact", json: #"{"int32Value":1e2,"int64Value":"1.5e1","uint32Value":7.0}"#,
            expected: .with { $0.int32Value = 100; $0.int64Value = 15; $0.uint32Value = 7 }),
        Row(rule: "enum names", json: #"{"color":"COLOR_GREEN","keyword":"SELF"}"#, expected: .with { $0.color = .green; $0.keyword = .self }),
        Row(rule: "enum numbers, known or not", json: #"{"color":-1,"keyword":77}"#, expected: .with { $0.color = .negative; $0.keyword = .unrecognized(77) }),
        Row(rule: "standard base64", json: #"{"bytesValue":"+/8="}"#, expected: .with { $0.bytesValue = [0xfb, 0xff] }),
        Row(rule: "URL-safe base64 without padding", json: #"{"bytesValue":"-_8"}"#, expected: .with { $0.bytesValue = [0xfb, 0xff] }),
        Row(rule: "special floats", json: #"{"floatValue":"NaN","doubleValue":"-Infinity"}"#, expected: .with { $0.floatValue = .nan; $0.doubleValue = -.infinity }),
        Row(rule: "floats as strings and exponents", json: #"{"floatValue":"1.5","doubleValue":-2.5E-3}"#, expected: .with { $0.floatValue = 1.5; $0.doubleValue = -0.0025 }),
        Row(rule: "null is the default", json: #"{"int32Value":null,"stringValue":null,"color":null}"#, expected: Scalars()),
        Row(rule: "escapes and surrogate pairs", json: #"{"stringValue":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"}"#,
            expected: .with { $0.stringValue = "\"\\/\u{8}\u{c}\n\r\té😀" }),
        Row(rule: "U+0000 in a string", json: #"{"stringValue":"a\u0000b"}"#, expected: .with { $0.stringValue = "a\u{0}b" }),
        Row(rule: "raw UTF-8", json: #"{"stringValue":"żółw 🐢"}"#, expected: .with { $0.stringValue = "żółw 🐢" }),
        Row(rule: "escaped field names", json: #"{"int32\u0056alue":3}"#, expected: .with { $0.int32Value = 3 }),
        Row(rule: "explicit defaults", json: #"{"int32Value":0,"stringValue":"","boolValue":false,"color":"COLOR_UNSPECIFIED","doubleValue":0}"#, expected: Scalars()),
    ]

    @Test(arguments: acceptedRows) func accepted(_ row: Row) throws {
        let parsed = try parse(row.json, as: Scalars.self)
        // NaN != NaN: compare the binary forms.
        #expect(try parsed.serializedBytes() == row.expected.serializedBytes())
    }

    @Test func explicitDefaultsWriteNothing() throws {
        let json = #"{"int32Value":0,"stringValue":"","boolValue":false,"color":"COLOR_UNSPECIFIED","bytesValue":""}"#
        #expect(try ProtoJSON.binary(fromJSON: Array(json.utf8), of: Scalars.self) == [])
    }

    @Test func repeatedMapsOneofsAndNesting() throws {
        let repeated = try parse(#"{"int32Values":[1,"2",3e0],"colors":["COLOR_RED",5],"messages":[{},{"int64Value":"9"}],"unpacked_int32_values":[0,0],"stringValues":null}"#, as: Repeated.self)
        #expect(repeated == .with {
            $0.int32Values = [1, 2, 3]; $0.colors = [.red, .unrecognized(5)]; $0.messages = [Scalars(), .with { $0.int64Value = 9 }]
            $0.unpackedInt32Values = [0, 0]
        })
        let maps = try parse(#"{"int32ToInt64":{"-1":"2","3":4},"boolToColor":{"false":"COLOR_RED"},"stringToMessage":{"a":{"boolValue":true}},"uint64ToBytes":{"18446744073709551615":"AQ=="},"fixed32_to_float":{"1":"Infinity"}}"#, as: Maps.self)
        #expect(maps == .with {
            $0.int32ToInt64 = [-1: 2, 3: 4]; $0.boolToColor = [false: .red]; $0.stringToMessage = ["a": .with { $0.boolValue = true }]
            $0.uint64ToBytes = [.max: [1]]; $0.fixed32ToFloat = [1: .infinity]
        })
        #expect(try parse(#"{"number":0,"inner":{"text":"x"}}"#, as: Choice.self) == .with { $0.value = .number(0); $0.other = .inner(.with { $0.text = "x" }) })
        #expect(try parse(#"{"text":null,"number":4}"#, as: Choice.self) == .with { $0.value = .number(4) })
        #expect(try parse(#"{"scalars":{}}"#, as: Choice.self) == .with { $0.value = .scalars(Scalars()) })
        #expect(try parse(#"{"middle":{"inners":[{"level":"LEVEL_LOW"}]}}"#, as: Outer.self) == .with { $0.middle = .with { $0.inners = [.with { $0.level = .low }] } })
        // A long nested message needs a length of several bytes.
        let long = String(repeating: "x", count: 300)
        #expect(try parse(#"{"inner":{"text":"\#(long)"},"scalars":{"stringValue":"\#(long)"}}"#, as: Outer.self) == .with {
            $0.inner = .with { $0.text = long }; $0.scalars = .with { $0.stringValue = long }
        })
    }

    struct Refusal: CustomTestStringConvertible, Sendable {
        let rule: String
        let json: String
        let message: String
        var testDescription: String { rule }
    }

    static let refusedRows: [Refusal] = [
        Refusal(rule: "unknown field", json: #"{"foo":1}"#, message: #"unknown field "foo" in prototest.v1.Scalars"#),
        Refusal(rule: "duplicate field", json: #"{"int32Value":1,"int32Value":2}"#, message: #"field "int32Value" of prototest.v1.Scalars occurs more than once (at byte 16)"#),
        Refusal(rule: "duplicate under both names", json: #"{"int32Value":1,"int32_value":2}"#, message: "occurs more than once"),
        Refusal(rule: "empty input", json: "", message: "invalid JSON at byte 0: expected an object for prototest.v1.Scalars, found the end of the input"),
        Refusal(rule: "not an object", json: "[]", message: "invalid JSON at byte 0: expected an object"),
        Refusal(rule: "trailing comma", json: #"{"int32Value":1,}"#, message: "invalid JSON at byte 16: expected a field name"),
        Refusal(rule: "missing colon", json: #"{"int32Value" 1}"#, message: "invalid JSON at byte 14: expected ':'"),
        Refusal(rule: "unterminated", json: #"{"int32Value":1"#, message: "invalid JSON at byte 15: expected ',' or '}', found the end of the input"),
        Refusal(rule: "trailing data", json: "{} {}", message: "invalid JSON at byte 3: expected the end of the input"),
        Refusal(rule: "control character", json: "{\"stringValue\":\"a\nb\"}", message: "invalid JSON at byte 17: control character"),
        Refusal(rule: "lone surrogate", json: #"{"stringValue":"\ud800"}"#, message: "unpaired surrogate"),
        Refusal(rule: "bad escape", json: #"{"stringValue":"\x"}"#, message: "invalid escape"),
        Refusal(rule: "single quotes", json: "{'int32Value':1}", message: "expected a field name"),
        Refusal(rule: "leading zero", json: #"{"int32Value":01}"#, message: "invalid number"),
        Refusal(rule: "leading plus", json: #"{"int32Value":+1}"#, message: "expected an integer"),
        Refusal(rule: "fraction for an integer", json: #"{"int32Value":1.5}"#, message: #"invalid value for field "int32Value" of prototest.v1.Scalars at byte 14: not an integer"#),
        Refusal(rule: "int32 out of range", json: #"{"int32Value":2147483648}"#, message: "out of range"),
        Refusal(rule: "uint32 negative", json: #"{"uint32Value":-1}"#, message: "out of range"),
        Refusal(rule: "uint64 out of range", json: #"{"uint64Value":"18446744073709551616"}"#, message: "out of range"),
        Refusal(rule: "int64 out of range", json: #"{"int64Value":"-9223372036854775809"}"#, message: "out of range"),
        Refusal(rule: "integer with spaces", json: #"{"int64Value":" 1"}"#, message: "expected an integer"),
        Refusal(rule: "bool as a string", json: #"{"boolValue":"true"}"#, message: "expected true or false"),
        Refusal(rule: "misspelled literal", json: #"{"boolValue":tru}"#, message: "invalid literal"),
        Refusal(rule: "number for a string", json: #"{"stringValue":1}"#, message: "expected a string"),
        Refusal(rule: "unknown enum name", json: #"{"color":"PURPLE"}"#, message: "not a value of prototest.v1.Color"),
        Refusal(rule: "enum number out of int32", json: #"{"color":4294967296}"#, message: "out of range"),
        Refusal(rule: "invalid base64", json: #"{"bytesValue":"a*=="}"#, message: "not base64"),
        Refusal(rule: "base64 of impossible length", json: #"{"bytesValue":"abcde"}"#, message: "not base64"),
        Refusal(rule: "float out of range", json: #"{"floatValue":1e39}"#, message: "out of range for a float"),
        Refusal(rule: "double out of range", json: #"{"doubleValue":1e400}"#, message: "out of range"),
        Refusal(rule: "NaN unquoted", json: #"{"doubleValue":NaN}"#, message: "expected a number"),
        Refusal(rule: "lowercase special float", json: #"{"doubleValue":"nan"}"#, message: "expected a number"),
        Refusal(rule: "object for a scalar", json: #"{"int32Value":{}}"#, message: "expected an integer"),
    ]

    @Test(arguments: refusedRows) func refused(_ row: Refusal) {
        let message = refusal(row.json, as: Scalars.self)
        #expect(message?.contains(row.message) == true, "got \(message ?? "no error")")
    }

    @Test func refusedInRepeatedMapsAndOneofs() {
        #expect(refusal(#"{"int32Values":[1,null]}"#, as: Repeated.self)?.contains("null is not allowed in an array") == true)
        #expect(refusal(#"{"int32Values":1}"#, as: Repeated.self)?.contains("expected an array") == true)
        #expect(refusal(#"{"int32Values":[1,]}"#, as: Repeated.self)?.contains("expected an integer") == true)
        #expect(refusal(#"{"int32ToInt64":{"x":1}}"#, as: Maps.self)?.contains("a map key of this field is an integer") == true)
        #expect(refusal(#"{"int32ToInt64":{"1.5":1}}"#, as: Maps.self)?.contains("not an integer") == true)
        #expect(refusal(#"{"boolToColor":{"yes":1}}"#, as: Maps.self)?.contains(#"a bool map key is "true" or "false""#) == true)
        #expect(refusal(#"{"stringToString":{"a":null}}"#, as: Maps.self)?.contains("null is not allowed as a map value") == true)
        #expect(refusal(#"{"int32ToInt64":{"1":"x"}}"#, as: Maps.self)?.contains(#"field "int32ToInt64" of prototest.v1.Maps"#) == true)
        #expect(refusal(#"{"number":1,"text":"a"}"#, as: Choice.self) == #"more than one field of oneof "value" in prototest.v1.Choice (at byte 12)"#)
        #expect(refusal(#"{"middle":{"inner":{"nope":1}}}"#, as: Outer.self) == #"unknown field "nope" in prototest.v1.Outer.Middle.Inner"#)
    }

    @Test func nestingIsLimited() throws {
        let limit = ProtoDecodingLimits.maximumNesting
        func nested(_ depth: Int) -> String {
            String(repeating: #"{"left":"#, count: depth - 1) + "{}" + String(repeating: "}", count: depth - 1)
        }
        #expect(try parse(nested(limit), as: Tree.self).left != nil)
        #expect(refusal(nested(limit + 1), as: Tree.self)?.contains("nested more than \(limit) deep") == true)
        // A deeply nested document of another shape stops at the first level that does not fit.
        #expect(refusal(String(repeating: "[", count: 100_000), as: Tree.self) != nil)
    }

    @Test(arguments: [
        ([0xFF], 16),  // not a UTF-8 start byte
        ([0xC0, 0x80], 16),  // overlong NUL
        ([0xED, 0xA0, 0x80], 16),  // an encoded surrogate
        ([0xF4, 0x90, 0x80, 0x80], 16),  // past U+10FFFF
        ([0xE2, 0x82], 16),  // truncated
    ] as [([UInt8], Int)])
    func invalidUTF8IsRefusedWithItsOffset(_ bytes: [UInt8], _ offset: Int) {
        let json = Array(#"{"stringValue":""#.utf8) + bytes + Array(#""}"#.utf8)
        #expect(throws: ProtoJSONError("invalid JSON at byte \(offset): invalid UTF-8")) {
            try ProtoJSON.binary(fromJSON: json, of: Scalars.self)
        }
        let outside = Array("{".utf8) + bytes + Array("}".utf8)
        #expect(throws: ProtoJSONError("invalid JSON at byte 1: invalid UTF-8")) {
            try ProtoJSON.binary(fromJSON: outside, of: Scalars.self)
        }
    }

    @Test func anyCollectionOfBytes() throws {
        let json = #"{"int32Value":3}"#
        let bytes = Array(json.utf8)
        #expect(try ProtoJSON.binary(fromJSON: bytes[...], of: Scalars.self) == [0x08, 0x03])
        #expect(try ProtoJSON.binary(fromJSON: json.utf8, of: Scalars.self) == [0x08, 0x03])
        #expect(try ProtoJSON.json(fromBinary: [0x08, 0x03][...], of: Scalars.self) == bytes)
    }
}
