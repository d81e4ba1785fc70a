import Foundation
import KindredProto
import KindredTestSupport
@_spi(Testing) import KindredProtobuf
import Testing

/// Byte compatibility with Python's `protobuf` package (the reference implementation's runtime),
/// for every message type in `ProtoRegistry`. The Python side is `python/compat.py`; it generates
/// its modules from the same proto/ tree. Fails, never skips, when Python or its packages are
/// missing.
@Suite(.serialized)
struct PythonCompatibilityTests {
    static let messagesPerType = 20

    /// Python fills messages at random (full ranges, any Unicode, unknown enum numbers, nested,
    /// repeated, maps, one member per oneof), some with unknown fields appended; Swift decodes and
    /// re-encodes each; Python checks it gets the same message back.
    @Test func pythonMessagesSurviveSwift() async throws {
        let work = try Workspace()
        let names = ProtoRegistry.allMessageTypes.map { $0.protoMessageName }
        try names.joined(separator: "\n").write(to: work.file("types.txt"), atomically: true, encoding: .utf8)
        try await work.python(
            "generate",
            "--types-file",
            work.file("types.txt").path,
            "--count",
            "\(Self.messagesPerType)",
            "--seed",
            "20261121"
        )

        var output = ""
        var decoded = 0
        for line in try String(contentsOf: work.file("python_cases.txt"), encoding: .utf8).split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            let (id, name, input) = (fields[0], String(fields[1]), try Hex.decode(fields[2]))
            let type = try #require(ProtoRegistry.messageTypesByName[name], "no Swift type for \(name)")
            do {
                output += "\(id) \(name) \(Hex.encode(try Self.reencode(type, input)))\n"
                decoded += 1
            } catch {
                Issue.record("case \(id) (\(name)): Swift could not decode Python's bytes: \(error)")
            }
        }
        #expect(decoded == names.count * Self.messagesPerType)
        try output.write(to: work.file("swift_output.txt"), atomically: true, encoding: .utf8)
        try await work.python("verify")
    }

    /// Swift makes random messages of every type; Python parses each (finding no field it does not
    /// know) and serializes it again; Swift decodes that and gets the message it started from.
    @Test func swiftMessagesSurvivePython() async throws {
        let work = try Workspace()
        var generator = SplitMix64(seed: 7)
        var messages: [Int: any ProtoMessage] = [:]
        var cases = ""
        var id = 0
        for type in ProtoRegistry.allMessageTypes {
            for _ in 0..<Self.messagesPerType {
                let message = try Self.random(type, &generator)
                messages[id] = message
                cases += "\(id) \(type.protoMessageName) \(Hex.encode(try message.serializedBytes()))\n"
                id += 1
            }
        }
        try cases.write(to: work.file("swift_cases.txt"), atomically: true, encoding: .utf8)
        try await work.python("echo")

        var checked = 0
        for line in try String(contentsOf: work.file("python_echo.txt"), encoding: .utf8).split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            let original = try #require(messages[Int(fields[0])!])
            #expect(
                try Self.decodes(try Hex.decode(fields[2]), to: original),
                "case \(fields[0]) (\(fields[1])) changed going through Python"
            )
            checked += 1
        }
        #expect(checked == messages.count)
    }

    /// The descriptors embedded for server reflection parse, build a pool, and define the symbols
    /// Swift says they define.
    @Test func reflectionDescriptorsBuildAPool() async throws {
        let work = try Workspace()
        let files = ProtoRegistry.fileDescriptors.files
        try files.map { "\($0.name) \(Hex.encode($0.serializedBytes))" }.joined(separator: "\n")
            .write(to: work.file("swift_descriptors.txt"), atomically: true, encoding: .utf8)
        try files.flatMap { file in file.symbols.map { "\(file.name) \($0)" } }.joined(separator: "\n")
            .write(to: work.file("swift_symbols.txt"), atomically: true, encoding: .utf8)
        try await work.python("descriptors")
    }

    private static func random<M: ProtoMessage>(_ type: M.Type, _ generator: inout SplitMix64) throws
        -> any ProtoMessage
    {
        try ProtoRandom.message(type, using: &generator)
    }

    private static func reencode<M: ProtoMessage>(_ type: M.Type, _ bytes: [UInt8]) throws -> [UInt8] {
        try M(serializedBytes: bytes).serializedBytes()
    }

    private static func decodes<M: ProtoMessage>(_ bytes: [UInt8], to message: M) throws -> Bool {
        try M(serializedBytes: bytes) == message
    }
}

/// A temporary folder holding the Python modules and the case files of one test; removed with it.
private final class Workspace {
    let url: URL
    let root: URL

    init() throws {
        // Tests/KindredProtobufTests/PythonCompatibilityTests.swift -> repository root.
        root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        url = FileManager.default.temporaryDirectory.appendingPathComponent("kindred-proto-compat-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }

    func file(_ name: String) -> URL { url.appendingPathComponent(name) }

    /// Runs `compat.py COMMAND ROOT WORK ARGUMENTS...` off the cooperative pool; records its output as an issue
    /// on failure.
    func python(_ command: String, _ arguments: String...) async throws {
        let script = root.appendingPathComponent("Tests/KindredProtobufTests/python/compat.py").path
        let result: ProcessOutput
        do {
            result = try await runPython(script, [command, root.path, url.path] + arguments)
        } catch {
            Issue.record("cannot run python3 (\(error)); the protobuf compatibility tests need it")
            throw error
        }
        guard result.status == 0 else {
            Issue.record("compat.py \(command) failed (\(result.status)):\n\(result.errorText)\(result.text)")
            throw CompatibilityFailure()
        }
    }
}

private struct CompatibilityFailure: Error {}

enum Hex {
    /// Lower-case hex, or "-" for no bytes (compat.py's format).
    static func encode(_ bytes: [UInt8]) -> String {
        if bytes.isEmpty { return "-" }
        let digits = Array("0123456789abcdef".utf8)
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            result.append(digits[Int(byte >> 4)])
            result.append(digits[Int(byte & 0xf)])
        }
        return String(decoding: result, as: UTF8.self)
    }

    static func decode(_ text: Substring) throws -> [UInt8] {
        if text == "-" { return [] }
        func value(_ digit: UInt8) throws -> UInt8 {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
            default: throw CompatibilityFailure()
            }
        }
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { throw CompatibilityFailure() }
        return try stride(from: 0, to: digits.count, by: 2).map { try value(digits[$0]) << 4 | value(digits[$0 + 1]) }
    }
}

/// A small seeded generator, so that failures reproduce.
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
