import Foundation
import Testing

/// Memory, measured in a process of its own (kindred-photo-bench, built next to the tests) so that other suites
/// running in this process cannot blur the figures.
@Suite struct MemoryTests {
    /// The benchmark executable built next to the test bundle.
    static var bench: String? {
        let exe =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let candidate = URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent("kindred-photo-bench")
        return FileManager.default.isExecutableFile(atPath: candidate.path) ? candidate.path : nil
    }

    struct Report: Decodable {
        var uploads: Int
        var warmRssKiB: Int
        var endRssKiB: Int
        var peakRssKiB: Int
    }

    static func runBench(_ arguments: [String]) throws -> (Report, rejected: String?) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(bench))
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let report = try JSONDecoder().decode(Report.self, from: Self.withoutNumbers(inFirst: data))
        let json = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let rejected = (json?["first"] as? [String: Any])?["rejected"] as? String
        return (report, rejected)
    }

    /// `first` mixes strings and numbers; the report only needs the other fields.
    static func withoutNumbers(inFirst data: Data) throws -> Data {
        var object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        object["first"] = nil
        return try JSONSerialization.data(withJSONObject: object)
    }

    /// 20 uploads after 4 warm-ups: the resident set stays where the warm-ups left it. A leaked 1080×1350 base image
    /// alone would add 4.4 MB per upload (88 MB); a leaked decode far more.
    @Test(.enabled(if: bench != nil, "kindred-photo-bench is not built next to the tests"))
    func residentSetStaysBoundedOverManyUploads() throws {
        let folder = try Fixtures.generated.get().folder
        let input = folder + "/leak.jpg"
        _ = try Python.run("make_images.py", ["--large", "1200x1500", input])
        let (report, rejected) = try Self.runBench([input, "--warmup", "4", "--runs", "20", "--webp-effort", "0"])
        #expect(rejected == nil)
        #expect(report.uploads == 20)
        let growthKiB = report.endRssKiB - report.warmRssKiB
        #expect(growthKiB < 16 * 1024, "RSS grew by \(growthKiB) KiB over 20 uploads")
        #expect(report.peakRssKiB < 300 * 1024)
    }

    /// The 30000×30000 PNG is refused from its header: the process never holds more than a small image would need
    /// (decoding it would need 900 MB).
    @Test(.enabled(if: bench != nil, "kindred-photo-bench is not built next to the tests"))
    func decompressionBombIsRefusedWithoutAllocating() throws {
        let folder = try Fixtures.generated.get().folder
        let (report, rejected) = try Self.runBench([folder + "/bomb.png", "--runs", "1"])
        #expect(rejected == "TOO_MANY_PIXELS")
        #expect(report.peakRssKiB < 100 * 1024, "peak RSS \(report.peakRssKiB) KiB")
    }
}
