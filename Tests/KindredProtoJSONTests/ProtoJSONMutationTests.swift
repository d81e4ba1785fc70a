import KindredProto
import KindredProtoJSON
import KindredProtobuf
import Testing

/// Outside bytes in both directions, mutated at random (bytes flipped, inserted, deleted, the input
/// cut): each conversion gives a result or a `ProtoJSONError`, never a crash, and whatever JSON is
/// accepted is a message that survives the trip back unchanged.
@Suite struct ProtoJSONMutationTests {
    static let mutationsPerSeed = 2_000

    /// Valid documents of every shape the mapping reads: the seeds the mutations start from.
    static let seeds: [any ProtoMessage] = [
        Scalars.with {
            $0.int32Value = -7; $0.sint64Value = .min; $0.uint64Value = .max; $0.floatValue = 1.5; $0.doubleValue = .nan
            $0.boolValue = true; $0.stringValue = "é\"\\\n😀"; $0.bytesValue = [0, 255, 7]; $0.color = .negative; $0.keyword = .self
        },
        Repeated.with {
            $0.int32Values = [1, -1]; $0.int64Values = [.max]; $0.doubleValues = [.infinity, 0.25]; $0.stringValues = ["a", ""]
            $0.colors = [.red, .unrecognized(9)]; $0.messages = [.with { $0.fixed64Value = 3 }]; $0.unpackedColors = [.green]
        },
        Maps.with {
            $0.stringToString = ["k": "v"]; $0.int32ToInt64 = [-1: 2]; $0.boolToColor = [true: .red]
            $0.stringToMessage = ["m": .with { $0.int32Value = 1 }]; $0.fixed32ToFloat = [4: -0.5]
        },
        Choice.with { $0.name = "n"; $0.value = .scalars(.with { $0.bytesValue = [1] }); $0.other = .id(5); $0.tags = ["t"] },
        Tree.with { $0.left = .with { $0.label = "l"; $0.named = ["x": Tree()] }; $0.extra = .note("z"); $0.children = [Tree()] },
    ]

    @Test(arguments: seeds.indices) func mutatedJSON(_ seed: Int) throws {
        let message = Self.seeds[seed]
        let type = type(of: message)
        let original = try ProtoJSON.json(fromBinary: message.serializedBytes(), of: type)
        var generator = SplitMix64(seed: UInt64(seed) &+ 1)
        var accepted = 0
        for _ in 0..<Self.mutationsPerSeed {
            let mutated = Self.mutate(original, &generator)
            guard let binary = try? ProtoJSON.binary(fromJSON: mutated, of: type) else { continue }
            accepted += 1
            #expect(try Self.survivesTheTripBack(binary, type), "\(String(decoding: mutated, as: UTF8.self))")
        }
        // Some mutations keep the document valid (a digit changed, whitespace added): both paths ran.
        #expect(accepted > 0 && accepted < Self.mutationsPerSeed)
    }

    @Test(arguments: seeds.indices) func mutatedBinary(_ seed: Int) throws {
        let message = Self.seeds[seed]
        let type = type(of: message)
        let original = try message.serializedBytes()
        var generator = SplitMix64(seed: UInt64(seed) &+ 100)
        for _ in 0..<Self.mutationsPerSeed {
            let mutated = Self.mutate(original, &generator)
            guard let json = try? ProtoJSON.json(fromBinary: mutated, of: type) else { continue }
            // Whatever the binary said, its JSON reads back.
            let binary = try ProtoJSON.binary(fromJSON: json, of: type)
            #expect(try Self.survivesTheTripBack(binary, type), "\(mutated) → \(String(decoding: json, as: UTF8.self))")
        }
    }

    /// Random bytes as JSON and as binary: refused or converted, nothing else.
    @Test func randomBytes() {
        var generator = SplitMix64(seed: 99)
        for _ in 0..<5_000 {
            let bytes = (0..<Int.random(in: 0...40, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            _ = try? ProtoJSON.binary(fromJSON: bytes, of: Tree.self)
            _ = try? ProtoJSON.json(fromBinary: bytes, of: Tree.self)
        }
    }

    /// `binary` decodes as a `type` message, whose JSON converts back to the same message.
    static func survivesTheTripBack(_ binary: [UInt8], _ type: any ProtoMessage.Type) throws -> Bool {
        func check<M: ProtoMessage>(_: M.Type) throws -> Bool {
            let message = try M(serializedBytes: binary)
            let again = try M(serializedBytes: ProtoJSON.binary(fromJSON: ProtoJSON.json(fromBinary: binary, of: M.self), of: M.self))
            // NaN != NaN, so such messages compare by their binary forms (maps, whose order in the binary
            // form follows the dictionary's, compare as values).
            return try message == again || message.serializedBytes() == again.serializedBytes()
        }
        return try check(type)
    }

    static func mutate(_ bytes: [UInt8], _ generator: inout SplitMix64) -> [UInt8] {
        var bytes = bytes
        let interesting: [UInt8] = Array(#"{}[]",:0-9eE.\"u tfn"#.utf8) + [0x00, 0x80, 0xC3, 0xFF, 0x08, 0x0A, 0x12]
        for _ in 0..<Int.random(in: 1...3, using: &generator) {
            let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &generator)
            let byte = Bool.random(using: &generator)
                ? interesting.randomElement(using: &generator)! : UInt8.random(in: 0...255, using: &generator)
            switch Int.random(in: 0..<4, using: &generator) {
            case 0 where !bytes.isEmpty: bytes[position] = byte
            case 1: bytes.insert(byte, at: position)
            case 2 where !bytes.isEmpty: bytes.remove(at: position)
            default: bytes.removeLast(bytes.isEmpty ? 0 : Int.random(in: 0...min(3, bytes.count), using: &generator))
            }
        }
        return bytes
    }
}

/// A small deterministic generator, so that a failing mutation can be replayed.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
