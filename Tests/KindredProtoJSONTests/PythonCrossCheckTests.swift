import Foundation
import KindredProto
import KindredProtoJSON
import KindredProtobuf
import KindredTestSupport
import Testing

/// The mapping against the reference implementation, Python's `google.protobuf.json_format`
/// (`python/crosscheck.py`): Python fills random messages of every public API type
/// (`kindred.api.v1`) and of the test protos; Kindred turns each one's binary form into JSON (which
/// must equal `MessageToJson`'s as JSON values and go back through Python's `Parse`) and turns
/// Python's JSON, and other spellings of it, into binary (which must be the same message). Fails,
/// never skips, when Python or its packages are missing.
@Suite(.serialized)
struct PythonCrossCheckTests {
    static let messagesPerType = 30
    static let variants = 2

    static var types: [any ProtoMessage.Type] {
        ProtoRegistry.allMessageTypes.filter {
            $0.protoMessageName.hasPrefix("kindred.api.v1.") || $0.protoMessageName.hasPrefix("prototest.v1.")
        }
    }

    @Test func kindredAgreesWithJSONFormat() async throws {
        let work = try Workspace()
        let names = Self.types.map { $0.protoMessageName }
        #expect(names.count > 50)
        try names.joined(separator: "\n").write(to: work.file("types.txt"), atomically: true, encoding: .utf8)
        try await work.python(
            "generate", "--types-file", work.file("types.txt").path, "--count", "\(Self.messagesPerType)", "--seed", "20261127"
        )
        var output = ""
        var converted = 0
        for line in try String(contentsOf: work.file("json_cases.txt"), encoding: .utf8).split(separator: "\n") {
            let columns = line.split(separator: " ", omittingEmptySubsequences: false)
            let (id, name) = (columns[0], String(columns[1]))
            // Seconds of conversion in a debug build: yield so they do not hold a thread of the cooperative pool.
            if converted % 50 == 0 { await Task.yield() }
            let type = try #require(ProtoRegistry.messageTypesByName[name], "no Swift type for \(name)")
            do {
                var row = "\(id) \(Self.hex(try ProtoJSON.json(fromBinary: Self.unhex(columns[2]), of: type)))"
                for json in columns[3...] {
                    row += " \(Self.hex(try ProtoJSON.binary(fromJSON: Self.unhex(json), of: type)))"
                }
                output += row + "\n"
                converted += 1
            } catch {
                Issue.record("case \(id) (\(name)): \(error); JSON \(String(decoding: Self.unhex(columns[3]), as: UTF8.self))")
            }
        }
        #expect(converted == names.count * Self.messagesPerType)
        try output.write(to: work.file("swift_json.txt"), atomically: true, encoding: .utf8)
        try await work.python("verify")
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.isEmpty ? "-" : bytes.map { String(format: "%02x", $0) }.joined()
    }

    static func unhex(_ text: Substring) -> [UInt8] {
        guard text != "-" else { return [] }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count / 2)
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }
}

private struct CrossCheckFailure: Error {}

/// A temporary folder for the generated Python modules and the case files.
private final class Workspace {
    let url: URL
    let root: URL

    init() throws {
        // Tests/KindredProtoJSONTests/PythonCrossCheckTests.swift -> repository root.
        root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        url = FileManager.default.temporaryDirectory.appendingPathComponent("kindred-proto-json-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }

    func file(_ name: String) -> URL { url.appendingPathComponent(name) }

    /// Runs `crosscheck.py COMMAND ROOT WORK ARGUMENTS...` off the cooperative pool; records its output as an
    /// issue on failure.
    func python(_ command: String, _ arguments: String...) async throws {
        let script = root.appendingPathComponent("Tests/KindredProtoJSONTests/python/crosscheck.py").path
        let result: ProcessOutput
        do {
            result = try await runPython(script, [command, root.path, url.path] + arguments)
        } catch {
            Issue.record("cannot run python3 (\(error)); the JSON cross-check needs it")
            throw error
        }
        guard result.status == 0 else {
            Issue.record("crosscheck.py \(command) failed (\(result.status)):\n\(result.errorText)\(result.text)")
            throw CrossCheckFailure()
        }
    }
}
