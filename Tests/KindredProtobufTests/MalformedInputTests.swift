import KindredProto
@_spi(Testing) import KindredProtobuf
import Testing

/// Bad input throws a `ProtoError`; it never crashes or decodes into garbage.
@Suite struct MalformedInputTests {
    private static let invalidUTF8: [[UInt8]] = [
        [0xff],  // never valid
        [0xc0, 0x80],  // overlong NUL
        [0xed, 0xa0, 0x80],  // UTF-16 surrogate
        [0xe2, 0x82],  // truncated sequence
        [0xf4, 0x90, 0x80, 0x80],  // beyond U+10FFFF
        [0x61, 0x00, 0xff],  // bad byte after a NUL
    ]

    @Test(arguments: invalidUTF8)
    func invalidUTF8IsRejectedEverywhere(_ text: [UInt8]) throws {
        let length = UInt8(text.count)
        let cases: [(String, () throws -> Void)] = [
            ("singular", { _ = try Prototest.V1.Scalars(serializedBytes: [0x72, length] + text) }),
            ("repeated", { _ = try Prototest.V1.Repeated(serializedBytes: [0x72, length] + text) }),
            ("oneof", { _ = try Prototest.V1.Choice(serializedBytes: [0x1a, length] + text) }),
            ("map key", { _ = try Prototest.V1.Maps(serializedBytes: [0x0a, length + 2, 0x0a, length] + text) }),
            ("map value", { _ = try Prototest.V1.Maps(serializedBytes: [0x0a, length + 2, 0x12, length] + text) }),
            ("nested", { _ = try Prototest.V1.Outer(serializedBytes: [0x1a, length + 2, 0x72, length] + text) }),
        ]
        for (place, decode) in cases {
            #expect(throws: ProtoError.self, "\(place)") { try decode() }
            do { try decode() } catch let error as ProtoError { #expect(error.code == .invalidUTF8, "\(place)") }
        }
        // The same bytes in a `bytes` field are fine.
        #expect(try Prototest.V1.Scalars(serializedBytes: [0x7a, length] + text).bytesValue == text)
    }

    @Test func malformedEncodings() {
        let cases: [[UInt8]] = [
            [0x08],  // tag without value
            [0x08, 0x80],  // unterminated varint
            [0x08] + Array(repeating: 0xff, count: 10) + [0x01],  // varint longer than ten bytes
            [0x72, 0x05, 0x61],  // length beyond the end
            [0x0a, 0x01, 0x61],  // field 1 (int32) with the wrong wire type
            [0x5d, 0x00, 0x00],  // truncated fixed32
            [0x61, 0x00],  // truncated fixed64
            [0x00, 0x00],  // field number 0
            [0x0b, 0x0c],  // groups
            [0x0f],  // wire type 7
            [0x8a, 0x01, 0x02, 0x08],  // truncated nested message
        ]
        for bytes in cases {
            #expect(throws: ProtoError(code: .malformed, messageName: "prototest.v1.Scalars"), "\(bytes)") {
                _ = try Prototest.V1.Scalars(serializedBytes: bytes)
            }
        }
        #expect(throws: ProtoError.self) { _ = try Prototest.V1.Outer(serializedBytes: [0x1a, 0x02, 0x08, 0x80]) }
    }

    /// protobuf-c's structs can be many times larger than the input (an empty element of a
    /// repeated message field costs two bytes on the wire and a whole struct in memory): the
    /// decoder refuses to spend more than 32 MiB plus 64 times the input size.
    @Test func expansionBeyondTheMemoryBudgetIsRefused() throws {
        let emptyChildren = Array(repeating: [UInt8]([0x22, 0x00]), count: 2 << 20).flatMap { $0 }
        #expect(throws: ProtoError(code: .tooLarge, messageName: "prototest.v1.Tree")) {
            _ = try Prototest.V1.Tree(serializedBytes: emptyChildren)
        }
        // The same number of bytes in fewer, larger elements decodes.
        var tree = Prototest.V1.Tree()
        tree.children = Array(repeating: .with { $0.label = String(repeating: "x", count: 1000) }, count: 4000)
        #expect(try Prototest.V1.Tree(serializedBytes: tree.serializedBytes()) == tree)
    }

    @Test func everyPrefixOfAValidMessage() throws {
        var generator = SplitMix64(seed: 99)
        for _ in 0..<20 {
            let message = try ProtoRandom.message(Prototest.V1.Outer.self, using: &generator)
            let bytes = try message.serializedBytes()
            var failures = 0
            for length in 0..<bytes.count {
                do { _ = try Prototest.V1.Outer(serializedBytes: Array(bytes[..<length])) } catch { failures += 1 }
            }
            #expect(bytes.isEmpty || failures > 0)
            #expect(try Prototest.V1.Outer(serializedBytes: bytes) == message)
        }
    }

    /// For every type: random bytes, and valid messages with bytes flipped, inserted, deleted and
    /// cut. Each decodes or throws; a crash fails the whole run.
    @Test(arguments: ProtoRegistry.allMessageTypes.map(TypeArgument.init))
    func fuzz(_ type: TypeArgument) throws {
        func run<M: ProtoMessage>(_: M.Type) throws {
            var generator = SplitMix64(
                seed: UInt64(truncatingIfNeeded: M.protoMessageName.utf8.reduce(5381) { $0 &* 33 &+ Int($1) })
            )
            var decoded = 0
            for _ in 0..<1_000 {
                let count = Int.random(in: 0...48, using: &generator)
                let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
                if let message = try? M(serializedBytes: bytes) {
                    decoded += 1
                    _ = try message.serializedBytes()  // whatever decodes, encodes
                }
            }
            for _ in 0..<100 {
                let valid = try ProtoRandom.message(M.self, using: &generator).serializedBytes()
                for _ in 0..<10 {
                    var bytes = valid
                    for _ in 0..<Int.random(in: 1...3, using: &generator) {
                        let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &generator)
                        switch Int.random(in: 0..<4, using: &generator) {
                        case 0 where !bytes.isEmpty: bytes[position] = UInt8.random(in: 0...255, using: &generator)
                        case 1: bytes.insert(UInt8.random(in: 0...255, using: &generator), at: position)
                        case 2 where !bytes.isEmpty: bytes.remove(at: position)
                        default: bytes = Array(bytes[..<position])
                        }
                    }
                    if let message = try? M(serializedBytes: bytes) {
                        decoded += 1
                        _ = try message.serializedBytes()
                    }
                }
            }
            #expect(decoded >= 0)
        }
        try run(type.type)
    }
}
