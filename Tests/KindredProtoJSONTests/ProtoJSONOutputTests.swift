import KindredProto
import KindredProtoJSON
import KindredProtobuf
import Testing

typealias Scalars = Prototest.V1.Scalars
typealias Repeated = Prototest.V1.Repeated
typealias Choice = Prototest.V1.Choice
typealias Maps = Prototest.V1.Maps
typealias Outer = Prototest.V1.Outer
typealias Tree = Prototest.V1.Tree

/// The JSON text of `message` as `ProtoJSON` writes it.
func jsonText(_ message: some ProtoMessage) throws -> String {
    String(decoding: try ProtoJSON.json(fromBinary: message.serializedBytes(), of: type(of: message)), as: UTF8.self)
}

/// Binary → JSON: one row per rule of the mapping's output side (exact text: the writer has one
/// output for each input).
@Suite struct ProtoJSONOutputTests {
    struct Row: CustomTestStringConvertible, Sendable {
        let rule: String
        let message: any ProtoMessage
        let json: String
        var testDescription: String { rule }
    }

    static let rows: [Row] = [
        Row(rule: "an empty message is {}", message: Scalars(), json: "{}"),
        Row(rule: "lowerCamelCase names", message: Scalars.with { $0.int32Value = 7 }, json: #"{"int32Value":7}"#),
        Row(rule: "negative int32 and sint32", message: Scalars.with { $0.int32Value = -1; $0.sint32Value = -2147483648 },
            json: #"{"int32Value":-1,"sint32Value":-2147483648}"#),
        Row(rule: "uint32 and fixed32 to their maximum", message: Scalars.with { $0.uint32Value = .max; $0.fixed32Value = .max },
            json: #"{"uint32Value":4294967295,"fixed32Value":4294967295}"#),
        Row(rule: "64-bit integers as strings", message: Scalars.with {
            $0.int64Value = .min; $0.sint64Value = -5; $0.sfixed64Value = .max; $0.uint64Value = .max; $0.fixed64Value = 1
        }, json: #"{"int64Value":"-9223372036854775808","sint64Value":"-5","sfixed64Value":"9223372036854775807","uint64Value":"18446744073709551615","fixed64Value":"1"}"#),
        Row(rule: "floats as the shortest text", message: Scalars.with { $0.floatValue = 0.1; $0.doubleValue = 0.1 },
            json: #"{"floatValue":0.1,"doubleValue":0.1}"#),
        Row(rule: "NaN and infinities as strings", message: Scalars.with { $0.floatValue = .nan; $0.doubleValue = -.infinity },
            json: #"{"floatValue":"NaN","doubleValue":"-Infinity"}"#),
        Row(rule: "positive infinity", message: Scalars.with { $0.doubleValue = .infinity }, json: #"{"doubleValue":"Infinity"}"#),
        Row(rule: "-0.0 is not the default", message: Scalars.with { $0.doubleValue = -0.0 }, json: #"{"doubleValue":-0.0}"#),
        Row(rule: "bool true; false is the default", message: Scalars.with { $0.boolValue = true }, json: #"{"boolValue":true}"#),
        Row(rule: "strings escaped", message: Scalars.with { $0.stringValue = "a\"b\\c\n\u{1}é😀" },
            json: #"{"stringValue":"a\"b\\c\n\u0001é😀"}"#),
        Row(rule: "bytes as standard base64 with padding", message: Scalars.with { $0.bytesValue = [0xfb, 0xff] },
            json: #"{"bytesValue":"+/8="}"#),
        Row(rule: "enums by name", message: Scalars.with { $0.color = .blueGreen; $0.keyword = .class },
            json: #"{"color":"COLOR_BLUE_GREEN","keyword":"CLASS"}"#),
        Row(rule: "negative enum value by name", message: Scalars.with { $0.color = .negative }, json: #"{"color":"COLOR_NEGATIVE"}"#),
        Row(rule: "unknown enum numbers as numbers", message: Scalars.with { $0.color = .unrecognized(42) }, json: #"{"color":42}"#),
        Row(rule: "repeated fields as arrays, packed or not", message: Repeated.with {
            $0.int32Values = [1, -1]; $0.int64Values = [5]; $0.colors = [.red, .unrecognized(9)]; $0.unpackedInt32Values = [0, 3]
            $0.boolValues = [false, true]; $0.stringValues = ["", "x"]; $0.bytesValues = [[], [1]]
        }, json: #"{"int32Values":[1,-1],"int64Values":["5"],"boolValues":[false,true],"stringValues":["","x"],"bytesValues":["","AQ=="],"colors":["COLOR_RED",9],"unpackedInt32Values":[0,3]}"#),
        Row(rule: "repeated messages", message: Repeated.with { $0.messages = [Scalars(), Scalars.with { $0.boolValue = true }] },
            json: #"{"messages":[{},{"boolValue":true}]}"#),
        Row(rule: "nested messages; an empty one is set", message: Outer.with {
            $0.middle = .with { $0.inner = .with { $0.text = "t"; $0.level = .high } }; $0.scalars = Scalars()
        }, json: #"{"middle":{"inner":{"text":"t","level":"LEVEL_HIGH"}},"scalars":{}}"#),
        Row(rule: "oneof members are written even at their default", message: Choice.with { $0.value = .number(0); $0.other = .id(0) },
            json: #"{"number":0,"id":"0"}"#),
        Row(rule: "oneof message member", message: Choice.with { $0.value = .scalars(Scalars()) }, json: #"{"scalars":{}}"#),
        Row(rule: "oneof bool and bytes members at their default", message: Choice.with { $0.value = .flag(false) },
            json: #"{"flag":false}"#),
        Row(rule: "maps as objects with string keys", message: Maps.with {
            $0.int32ToInt64 = [-3: 4]; $0.boolToColor = [true: .green]; $0.uint64ToBytes = [18446744073709551615: [255]]
            $0.sint64ToDouble = [-1: .nan]; $0.fixed32ToFloat = [7: 1.5]; $0.stringToMessage = ["k": Scalars()]
        }, json: #"{"int32ToInt64":{"-3":"4"},"uint64ToBytes":{"18446744073709551615":"/w=="},"boolToColor":{"true":"COLOR_GREEN"},"stringToMessage":{"k":{}},"sint64ToDouble":{"-1":"NaN"},"fixed32ToFloat":{"7":1.5}}"#),
        Row(rule: "map values at their default are written", message: Maps.with { $0.stringToString = ["": ""] },
            json: #"{"stringToString":{"":""}}"#),
        Row(rule: "recursive messages", message: Tree.with { $0.left = .with { $0.label = "l" }; $0.extra = .note("") },
            json: #"{"left":{"label":"l"},"note":""}"#),
    ]

    @Test(arguments: rows) func output(_ row: Row) throws {
        #expect(try jsonText(row.message) == row.json)
    }

    /// The binary form may repeat fields; protobuf's rules decide what the message holds.
    @Test(arguments: [
        // int32Value twice: the last wins.
        ([0x08, 0x01, 0x08, 0x02], #"{"int32Value":2}"#),
        // An explicit default on the wire is still the default.
        ([0x08, 0x00, 0x68, 0x00, 0x72, 0x00], #"{}"#),
        // Unknown fields are dropped.
        ([0xA8, 0x1F, 0x01, 0x08, 0x05], #"{"int32Value":5}"#),
        // Fields out of order come out in field-number order.
        ([0x68, 0x01, 0x08, 0x05], #"{"int32Value":5,"boolValue":true}"#),
    ] as [([UInt8], String)])
    func wireRules(_ bytes: [UInt8], _ json: String) throws {
        #expect(String(decoding: try ProtoJSON.json(fromBinary: bytes, of: Scalars.self), as: UTF8.self) == json)
    }

    @Test func repeatedOccurrencesConcatenateAndMessagesMerge() throws {
        // Repeated int32Values packed [1,2], then unpacked 3; Outer.scalars twice (merged).
        #expect(
            String(decoding: try ProtoJSON.json(fromBinary: [0x0A, 0x02, 0x01, 0x02, 0x08, 0x03], of: Repeated.self), as: UTF8.self)
                == #"{"int32Values":[1,2,3]}"#)
        let outer: [UInt8] = [0x1A, 0x02, 0x08, 0x01, 0x1A, 0x02, 0x68, 0x01]
        #expect(
            String(decoding: try ProtoJSON.json(fromBinary: outer, of: Outer.self), as: UTF8.self)
                == #"{"scalars":{"int32Value":1,"boolValue":true}}"#)
    }

    @Test func theLastOneofMemberWins() throws {
        // number = 5, then text = "a": text wins.
        let bytes: [UInt8] = [0x10, 0x05, 0x1A, 0x01, 0x61]
        #expect(String(decoding: try ProtoJSON.json(fromBinary: bytes, of: Choice.self), as: UTF8.self) == #"{"text":"a"}"#)
    }

    @Test func aRepeatedMapKeyKeepsTheLastValue() throws {
        let bytes: [UInt8] = [0x0A, 0x06, 0x0A, 0x01, 0x6B, 0x12, 0x01, 0x31, 0x0A, 0x06, 0x0A, 0x01, 0x6B, 0x12, 0x01, 0x32]
        #expect(String(decoding: try ProtoJSON.json(fromBinary: bytes, of: Maps.self), as: UTF8.self) == #"{"stringToString":{"k":"2"}}"#)
    }

    @Test(arguments: [
        [0x08] as [UInt8],  // truncated varint
        [0x0A, 0x05, 0x01],  // length past the end
        [0x09, 0, 0, 0, 0, 0, 0, 0, 0],  // int32Value with a 64-bit wire type
        [0x72, 0x01, 0xFF],  // stringValue not UTF-8
        [0x0B],  // group
    ])
    func malformedBinaryIsRefused(_ bytes: [UInt8]) {
        #expect(throws: ProtoJSONError.self) { try ProtoJSON.json(fromBinary: bytes, of: Scalars.self) }
    }

    @Test func deepNestingIsRefused() throws {
        var tree = Tree.with { $0.label = "leaf" }
        for _ in 0..<ProtoDecodingLimits.maximumNesting { tree = Tree.with { [tree] in $0.left = tree } }
        let error = #expect(throws: ProtoJSONError.self) { try jsonText(tree) }
        #expect(error?.message.contains("nested more than 100 deep") == true)
        var shallower = Tree.with { $0.label = "leaf" }
        for _ in 0..<(ProtoDecodingLimits.maximumNesting - 1) { shallower = Tree.with { [shallower] in $0.left = shallower } }
        #expect(try jsonText(shallower).hasSuffix(#"{"label":"leaf"}"# + String(repeating: "}", count: 99)))
    }
}
