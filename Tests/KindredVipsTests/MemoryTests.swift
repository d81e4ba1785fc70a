import Foundation
import KindredTestSupport
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

    /// The fields of kindred-photo-bench's JSON report these tests read.
    struct Report {
        var uploads: Int
        var firstHalfMaxRssKiB: Int
        var secondHalfMaxRssKiB: Int
        var peakRssKiB: Int
        /// The first upload's rejection reason, nil when it was processed.
        var rejected: String?
    }

    static func runBench(_ arguments: [String]) async throws -> Report {
        let result = try await runProcess(try #require(bench), arguments)
        #expect(result.status == 0)
        let data = result.standardOutput
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return Report(
            uploads: try #require(json["uploads"] as? Int),
            firstHalfMaxRssKiB: try #require(json["firstHalfMaxRssKiB"] as? Int),
            secondHalfMaxRssKiB: try #require(json["secondHalfMaxRssKiB"] as? Int),
            peakRssKiB: try #require(json["peakRssKiB"] as? Int),
            rejected: (json["first"] as? [String: Any])?["rejected"] as? String
        )
    }

    /// 16 uploads after 4 warm-ups: the resident set peaks no higher in the second 8 than in the first 8 (the
    /// allocator's churn moves single readings by ~15 MB, the peaks by far less). A leaked 1080×1350 base image alone
    /// would add 4.4 MB per upload (35 MB between the halves). (Without the unref in VipsImageRef's deinit this test
    /// measured +92 MB.)
    @Test(.enabled(if: bench != nil, "kindred-photo-bench is not built next to the tests"))
    func residentSetStaysBoundedOverManyUploads() async throws {
        let folder = try await Fixtures.folder()
        let input = folder + "/leak.jpg"
        _ = try await Python.run("make_images.py", ["--large", "1080x1350", input])
        let report = try await Self.runBench([input, "--warmup", "4", "--runs", "16", "--webp-effort", "0"])
        #expect(report.rejected == nil)
        #expect(report.uploads == 16)
        let growthKiB = report.secondHalfMaxRssKiB - report.firstHalfMaxRssKiB
        #expect(growthKiB < 8 * 1024, "peak RSS grew by \(growthKiB) KiB from the first 8 uploads to the last 8")
        #expect(report.peakRssKiB < 300 * 1024)
    }

    /// The 30000×30000 PNG is refused from its header: the process never holds more than a small image would need
    /// (decoding it would need 900 MB).
    @Test(.enabled(if: bench != nil, "kindred-photo-bench is not built next to the tests"))
    func decompressionBombIsRefusedWithoutAllocating() async throws {
        let folder = try await Fixtures.folder()
        let report = try await Self.runBench([folder + "/bomb.png", "--runs", "1"])
        #expect(report.rejected == "TOO_MANY_PIXELS")
        #expect(report.peakRssKiB < 100 * 1024, "peak RSS \(report.peakRssKiB) KiB")
    }
}
