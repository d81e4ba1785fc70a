import KindredProto
import KindredProtobuf
import Testing

private typealias Scalars = Prototest.V1.Scalars
private typealias Repeated = Prototest.V1.Repeated
private typealias Color = Prototest.V1.Color
private typealias Outer = Prototest.V1.Outer
private typealias Choice = Prototest.V1.Choice
private typealias Maps = Prototest.V1.Maps
private typealias Tree = Prototest.V1.Tree

private func roundTrip<M: ProtoMessage>(_ message: M) throws -> M {
    let bytes = try message.serializedBytes()
    #expect(message.serializedSize == bytes.count)
    #expect(try message.withUnsafeSerializedBytes { Array($0) } == bytes)
    return try M(serializedBytes: bytes)
}

private func fullScalars() -> Scalars {
    var scalars = Scalars()
    scalars.int32Value = .min
    scalars.sint32Value = -1
    scalars.sfixed32Value = .max
    scalars.int64Value = .min
    scalars.sint64Value = .min
    scalars.sfixed64Value = -2
    scalars.uint32Value = .max
    scalars.fixed32Value = 0xdead_beef
    scalars.uint64Value = .max
    scalars.fixed64Value = 1 << 63
    scalars.floatValue = -.infinity
    scalars.doubleValue = .leastNonzeroMagnitude
    scalars.boolValue = true
    scalars.stringValue = "héllo, 世界 🌍"
    scalars.bytesValue = [0, 0xff, 0x80, 0]
    scalars.color = .blueGreen
    scalars.keyword = .class
    return scalars
}

@Suite struct RoundTripTests {
    @Test func echoRequestBytes() throws {
        var request = Kindred.Testing.V1.EchoRequest()
        request.message = "hi"
        request.payload = [1, 2]
        request.failWithCode = 5
        let bytes = try request.serializedBytes()
        #expect(bytes == [0x0a, 0x02, 0x68, 0x69, 0x12, 0x02, 0x01, 0x02, 0x18, 0x05])
        #expect(try Kindred.Testing.V1.EchoRequest(serializedBytes: bytes) == request)
        #expect(try Kindred.Testing.V1.EchoRequest(serializedBytes: bytes[...]) == request)
        #expect(
            Kindred.Testing.V1.EchoRequest.with {
                $0.message = "hi"; $0.payload = [1, 2]; $0.failWithCode = 5
            } == request
        )
    }

    /// Every type: the default message encodes to nothing, and nothing decodes to the default.
    @Test(arguments: ProtoRegistry.allMessageTypes.map(TypeArgument.init))
    func defaultsAreOmitted(_ type: TypeArgument) throws {
        func check<M: ProtoMessage>(_: M.Type) throws {
            #expect(try M().serializedBytes() == [])
            #expect(try M(serializedBytes: [UInt8]()) == M())
        }
        try check(type.type)
    }

    @Test func everyScalarTypeAtItsLimits() throws {
        let scalars = fullScalars()
        #expect(try roundTrip(scalars) == scalars)
        // Values with a known encoding: zigzag for sint32, ten bytes for a negative int32.
        var small = Scalars()
        small.sint32Value = -1
        #expect(try small.serializedBytes() == [0x10, 0x01])
        small = Scalars()
        small.int32Value = -1
        #expect(try small.serializedBytes() == [0x08] + Array(repeating: 0xff, count: 9) + [0x01])
        small = Scalars()
        small.fixed32Value = 1
        #expect(try small.serializedBytes() == [0x45, 1, 0, 0, 0])
    }

    @Test func floatingPointSpecialValues() throws {
        for value in [Double.nan, .infinity, -.infinity, .ulpOfOne, -.greatestFiniteMagnitude] {
            var scalars = Scalars()
            scalars.doubleValue = value
            scalars.floatValue = Float(value)
            let decoded = try roundTrip(scalars)
            #expect(decoded.doubleValue.bitPattern == value.bitPattern)
            #expect(decoded.floatValue.bitPattern == Float(value).bitPattern)
        }
    }

    @Test func negativeZeroIsWritten() throws {
        var scalars = Scalars()
        scalars.floatValue = -0.0
        scalars.doubleValue = -0.0
        let bytes = try scalars.serializedBytes()
        #expect(bytes == [0x5d, 0, 0, 0, 0x80, 0x61, 0, 0, 0, 0, 0, 0, 0, 0x80])
        let decoded = try Scalars(serializedBytes: bytes)
        #expect(decoded.floatValue.sign == .minus && decoded.doubleValue.sign == .minus)
        scalars.floatValue = 0
        scalars.doubleValue = 0
        #expect(try scalars.serializedBytes() == [])
    }

    @Test func everyRepeatedType() throws {
        var repeated = Repeated()
        repeated.int32Values = [0, -1, .max, .min]
        repeated.sint32Values = [-1, 1, .min]
        repeated.sfixed32Values = [7, -7]
        repeated.int64Values = [.min, .max, 0]
        repeated.sint64Values = [-300, 300]
        repeated.sfixed64Values = [.min]
        repeated.uint32Values = [.max, 0, 1]
        repeated.fixed32Values = [1, 2, 3]
        repeated.uint64Values = [.max]
        repeated.fixed64Values = [0, .max]
        repeated.floatValues = [0, -0.0, 1.5, .infinity]
        repeated.doubleValues = [0, -2.5, .greatestFiniteMagnitude]
        repeated.boolValues = [true, false, true]
        repeated.stringValues = ["", "a", "ünïcode", ""]
        repeated.bytesValues = [[], [0], [1, 2, 3]]
        repeated.colors = [.red, .unspecified, .negative, .unrecognized(77)]
        repeated.messages = [Scalars(), fullScalars(), Scalars()]
        repeated.unpackedInt32Values = [1, -1, 0]
        repeated.unpackedColors = [.green, .unrecognized(-9)]
        #expect(try roundTrip(repeated) == repeated)
    }

    @Test func packedAndUnpackedRepeatedFields() throws {
        var repeated = Repeated()
        repeated.int32Values = [1, 2]
        repeated.unpackedInt32Values = [1, 2]
        // Field 1 packed (one length-delimited record), field 18 unpacked (one record each).
        #expect(try repeated.serializedBytes() == [0x0a, 0x02, 0x01, 0x02, 0x90, 0x01, 0x01, 0x90, 0x01, 0x02])
        // Both encodings decode for either field.
        let swapped: [UInt8] = [0x08, 0x01, 0x08, 0x02, 0x92, 0x01, 0x02, 0x01, 0x02]
        let decoded = try Repeated(serializedBytes: swapped)
        #expect(decoded.int32Values == [1, 2] && decoded.unpackedInt32Values == [1, 2])
    }

    @Test func nestedMessages() throws {
        var inner = Outer.Middle.Inner()
        inner.text = "deep"
        inner.level = .high
        var middle = Outer.Middle()
        middle.inner = inner
        middle.inners = [inner, Outer.Middle.Inner(), inner]
        var outer = Outer()
        outer.middle = middle
        outer.inner = inner
        outer.scalars = fullScalars()
        outer.repeated = Repeated()  // present though empty
        let decoded = try roundTrip(outer)
        #expect(decoded == outer)
        #expect(decoded.repeated != nil)
        #expect(decoded.middle?.inner?.level == .high)
    }

    @Test(arguments: [
        Choice.Value.number(0), .number(-5), .text(""), .text("x"), .blob([]), .blob([9]), .color(.unspecified),
        .color(.unrecognized(1234)), .scalars(Scalars()), .ratio(0), .ratio(-0.5), .flag(false), .flag(true),
    ])
    func oneofMembersArePresentEvenAtTheirDefault(_ value: Prototest.V1.Choice.Value) throws {
        var choice = Choice()
        choice.value = value
        let bytes = try choice.serializedBytes()
        #expect(!bytes.isEmpty)
        #expect(try Choice(serializedBytes: bytes).value == value)
    }

    @Test func oneofsAreIndependent() throws {
        var choice = Choice()
        choice.name = "both"
        choice.value = .text("t")
        choice.other = .inner(Outer.Middle.Inner())
        choice.tags = ["a", "b"]
        #expect(try roundTrip(choice) == choice)
        choice.value = nil
        choice.other = .id(.max)
        #expect(try roundTrip(choice) == choice)
        // The last member on the wire wins.
        let bytes: [UInt8] = [0x10, 0x07, 0x1a, 0x01, 0x7a, 0x10, 0x08]
        #expect(try Choice(serializedBytes: bytes).value == .number(8))
    }

    @Test func maps() throws {
        var maps = Maps()
        maps.stringToString = ["": "", "k": "v", "ключ": "значение"]
        maps.int32ToInt64 = [0: 0, -1: .min, .max: 5]
        maps.uint64ToBytes = [.max: [1, 2], 0: []]
        maps.boolToColor = [true: .red, false: .unrecognized(42)]
        maps.stringToMessage = ["a": fullScalars(), "b": Scalars()]
        maps.sint64ToDouble = [.min: -0.0, 3: .infinity]
        maps.fixed32ToFloat = [7: 1.25]
        #expect(try roundTrip(maps) == maps)
        // A repeated key keeps its last value.
        let bytes: [UInt8] = [
            0x0a, 0x06, 0x0a, 0x01, 0x6b, 0x12, 0x01, 0x31, 0x0a, 0x06, 0x0a, 0x01, 0x6b, 0x12, 0x01, 0x32,
        ]
        #expect(try Maps(serializedBytes: bytes).stringToString == ["k": "2"])
        // An entry without key or value has the defaults.
        #expect(try Maps(serializedBytes: [0x0a, 0x00]).stringToString == ["": ""])
        #expect(try Maps(serializedBytes: [0x2a, 0x00]).stringToMessage == ["": Scalars()])
    }

    @Test func recursiveMessages() throws {
        var leaf = Tree()
        leaf.label = "leaf"
        var node = leaf
        // A chain 50 deep; every other field holds a leaf, so the encoding grows linearly.
        for depth in 0..<50 {
            var parent = Tree()
            parent.label = "\(depth)"
            parent.left = node
            parent.right = depth.isMultiple(of: 3) ? leaf : nil
            parent.children = [leaf, Tree()]
            parent.extra = depth.isMultiple(of: 2) ? .alternative(leaf) : .note("n")
            parent.named = ["x": leaf]
            node = parent
        }
        let decoded = try roundTrip(node)
        #expect(decoded == node)
        #expect(decoded.left?.left?.label == "47")
        #expect(try node.serializedBytes().count < 10_000)
    }

    @Test func nestingDeeperThanTheLimitIsRejected() throws {
        func nested(_ depth: Int) -> Tree {
            var tree = Tree()
            for _ in 1..<depth {
                var parent = Tree()
                parent.left = tree
                tree = parent
            }
            return tree
        }
        let limit = ProtoDecodingLimits.maximumNesting
        #expect(try roundTrip(nested(limit)) == nested(limit))
        let tooDeep = try nested(limit + 1).serializedBytes()
        #expect(throws: ProtoError(code: .nestingTooDeep, messageName: "prototest.v1.Tree")) {
            try Tree(serializedBytes: tooDeep)
        }
        // 200,000 levels of `left` (field 2) would overflow protobuf-c's stack without the check.
        var lengths = [0]
        for _ in 0..<200_000 { lengths.append(lengths.last! + 1 + varint(UInt64(lengths.last!)).count) }
        var hostile: [UInt8] = []
        for length in lengths.dropLast().reversed() { hostile += [0x12] + varint(UInt64(length)) }
        #expect(hostile.count == lengths.last!)
        #expect(throws: ProtoError(code: .nestingTooDeep, messageName: "prototest.v1.Tree")) {
            try Tree(serializedBytes: hostile)
        }
    }

    @Test func swiftKeywordsAsNames() throws {
        var keywords = Prototest.V1.Keywords()
        keywords.class = "c"
        keywords.func = 1
        keywords.`self` = true
        keywords.type = "t"
        keywords.protocol = 2
        keywords.in = "i"
        keywords.default = "d"
        keywords.hashValue_ = "h"
        keywords.serializedSize_ = "s"
        keywords.`init` = "init"
        keywords.nested = Prototest.V1.Keywords.Type_()
        #expect(try roundTrip(keywords) == keywords)
        #expect(Prototest.V1.Keyword(rawValue: 3) == .unrecognized_)
        #expect(Prototest.V1.Keyword() == .default)
    }

    @Test func fieldNumbersBeyondTheDenseTable() throws {
        var sparse = Prototest.V1.Sparse()
        sparse.low = "l"
        sparse.high = -1
        sparse.middle = ["m"]
        let bytes = try sparse.serializedBytes()
        #expect(bytes.starts(with: [0x0a, 0x01, 0x6c]))
        #expect(try Prototest.V1.Sparse(serializedBytes: bytes) == sparse)
    }

    @Test func unknownEnumNumbersArePreserved() throws {
        #expect(Color(rawValue: 99) == .unrecognized(99))
        #expect(Color.unrecognized(1) == .red)
        #expect(Color.unrecognized(1).hashValue == Color.red.hashValue)
        #expect(Color.allCases == [.unspecified, .red, .green, .blueGreen, .negative])
        #expect(Color() == .unspecified && Color.negative.rawValue == -1)
        let decoded = try Scalars(serializedBytes: [0x80, 0x01, 0x63])  // color = 99
        #expect(decoded.color == .unrecognized(99))
        #expect(try decoded.serializedBytes() == [0x80, 0x01, 0x63])
    }

    @Test func stringsContainingNUL() throws {
        var scalars = Scalars()
        scalars.stringValue = "a\u{0}b"
        let bytes = try scalars.serializedBytes()
        #expect(bytes == [0x72, 0x03, 0x61, 0x00, 0x62])
        #expect(try Scalars(serializedBytes: bytes).stringValue == "a\u{0}b")

        var repeated = Repeated()
        repeated.stringValues = ["x", "\u{0}", "", "y\u{0}"]
        #expect(try roundTrip(repeated) == repeated)
        var choice = Choice()
        choice.value = .text("\u{0}\u{0}")
        #expect(try roundTrip(choice) == choice)
        var maps = Maps()
        maps.stringToString = ["\u{0}": "v\u{0}", "k": "v"]
        #expect(try roundTrip(maps) == maps)
    }

    @Test func unknownFieldsAreSkipped() throws {
        var request = Kindred.Testing.V1.EchoRequest()
        request.message = "m"
        var bytes = try request.serializedBytes()
        bytes += [0xc0, 0xb8, 0x02, 0x2a]  // 5000: varint 42
        bytes += [0xca, 0xb8, 0x02, 0x02, 0xff, 0xfe]  // 5001: 2 bytes (not UTF-8: unknown, so unchecked)
        bytes += [0xd1, 0xb8, 0x02, 1, 2, 3, 4, 5, 6, 7, 8]  // 5002: fixed64
        bytes += [0xdd, 0xb8, 0x02, 1, 2, 3, 4]  // 5003: fixed32
        let decoded = try Kindred.Testing.V1.EchoRequest(serializedBytes: bytes)
        #expect(decoded == request)
        #expect(try decoded.serializedBytes() == [0x0a, 0x01, 0x6d])
    }

    @Test func laterOccurrencesWin() throws {
        // A scalar: the last value.
        #expect(try Scalars(serializedBytes: [0x08, 0x01, 0x08, 0x02]).int32Value == 2)
        // A message that occurs twice is merged: strings, repeated fields and sub-messages are.
        let split: [UInt8] = [0x0a, 0x05, 0x0a, 0x03, 0x0a, 0x01, 0x61, 0x0a, 0x04, 0x12, 0x02, 0x0a, 0x00]
        let outer = try Outer(serializedBytes: split)
        #expect(outer.middle?.inner?.text == "a")
        #expect(outer.middle?.inners.count == 1)
        withKnownIssue("protobuf-c 1.4.1 drops the earlier occurrence's proto3 numbers when merging") {
            let merged = try Outer(serializedBytes: [0x1a, 0x02, 0x08, 0x05, 0x1a, 0x02, 0x10, 0x06])
            #expect(merged.scalars?.sint32Value == 3)
            #expect(merged.scalars?.int32Value == 5)
        }
    }

    @Test func largeMessages() throws {
        var request = Kindred.Testing.V1.EchoRequest()
        request.payload = (0..<4_194_304).map { UInt8(truncatingIfNeeded: $0) }
        request.message = String(repeating: "é", count: 100_000)
        #expect(try roundTrip(request) == request)
        var response = Kindred.Testing.V1.EchoResponse()
        response.seenMetadata = (0..<10_000).map { "key-\($0)=value" }
        #expect(try roundTrip(response) == response)
    }
}

func varint(_ value: UInt64) -> [UInt8] {
    var value = value
    var bytes: [UInt8] = []
    repeat {
        bytes.append(UInt8(value & 0x7f) | (value > 0x7f ? 0x80 : 0))
        value >>= 7
    } while value > 0
    return bytes
}

/// A message type as a test argument, named in test output.
struct TypeArgument: CustomTestStringConvertible, Sendable {
    let type: any ProtoMessage.Type
    var testDescription: String { type.protoMessageName }
}
