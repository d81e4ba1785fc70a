import ArgumentParser
import Foundation
import KindredVips

#if canImport(Glibc)
    import Glibc
#endif

/// Runs `PhotoPipeline.process` on one file, sequentially or from several threads, and prints what it cost:
/// uploads per second, latency percentiles, CPU per upload and memory (VmRSS, VmHWM from /proc/self/status).
/// Used by Tests/Benchmarks/photo-pipeline.sh (release build) and by the leak and bomb tests (debug build).
@main
struct PhotoBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kindred-photo-bench",
        abstract: "Measures the photo pipeline on one input file; prints one JSON object."
    )

    @Argument(help: "The image to process.")
    var input: String

    @Option(help: "Concurrent uploaders (threads), each running process() in a loop.")
    var workers = 1

    @Option(help: "Stop after this many seconds (0: no time limit).")
    var seconds = 0.0

    @Option(help: "Stop after this many measured uploads in total (0: no count limit).")
    var runs = 0

    @Option(help: "Uploads run before measuring (the resident set is read after them: warmRssKiB).")
    var warmup = 1

    @Option(help: "WebP encoder effort, 0...6 (PhotoPipeline's default is 2).")
    var webpEffort = 2

    mutating func validate() throws {
        guard workers >= 1 else { throw ValidationError("--workers must be at least 1") }
        guard seconds > 0 || runs > 0 else { throw ValidationError("give --seconds or --runs") }
        guard warmup >= 1 else { throw ValidationError("--warmup must be at least 1") }
    }

    func run() throws {
        guard let data = FileManager.default.contents(atPath: self.input) else {
            throw ValidationError("cannot read \(self.input)")
        }
        let bytes = [UInt8](data)
        let pipeline = {
            var pipeline = PhotoPipeline()
            pipeline.webpEffort = self.webpEffort
            return pipeline
        }()

        // Warm-up uploads first: the first one's outcome, and the resident set once libvips and the allocator are
        // warm.
        let first: [String: Any]
        do {
            let photo = try pipeline.process(bytes)
            first = [
                "source": photo.source.rawValue, "sourceWidth": photo.sourceWidth, "sourceHeight": photo.sourceHeight,
                "renditions": photo.renditions.count, "renditionBytes": photo.renditions.reduce(0) { $0 + $1.bytes.count },
            ]
        } catch {
            first = ["rejected": error.reason]
        }
        for _ in 1..<self.warmup { _ = try? pipeline.process(bytes) }
        let warmRSS = Self.status("VmRSS")

        let state = RunState(limit: self.runs > 0 ? self.runs : Int.max)
        let deadline = self.seconds > 0 ? Date().addingTimeInterval(self.seconds) : Date.distantFuture
        let cpuStart = Self.cpuSeconds()
        let start = Date()
        let threads = (0..<self.workers).map { _ in
            Thread {
                while Date() < deadline, state.claim() {
                    let began = DispatchTime.now().uptimeNanoseconds
                    _ = try? pipeline.process(bytes)
                    state.record(DispatchTime.now().uptimeNanoseconds - began, residentKiB: Self.status("VmRSS"))
                }
                state.finish()
            }
        }
        threads.forEach { $0.stackSize = 8 << 20; $0.start() }
        state.waitForAll(self.workers)
        let elapsed = Date().timeIntervalSince(start)
        let cpu = Self.cpuSeconds() - cpuStart

        let latencies = state.latencies.sorted()
        func percentile(_ p: Double) -> Double {
            guard !latencies.isEmpty else { return 0 }
            return Double(latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]) / 1e6
        }
        let result: [String: Any] = [
            "input": self.input, "inputBytes": bytes.count, "workers": self.workers, "first": first,
            "uploads": latencies.count, "seconds": elapsed,
            "uploadsPerSecond": elapsed > 0 ? Double(latencies.count) / elapsed : 0,
            "p50Ms": percentile(0.5), "p99Ms": percentile(0.99),
            "cpuMsPerUpload": latencies.isEmpty ? 0 : cpu * 1000 / Double(latencies.count),
            "warmRssKiB": warmRSS, "endRssKiB": Self.status("VmRSS"), "peakRssKiB": Self.status("VmHWM"),
            // The largest VmRSS seen after an upload in the first and in the second half of the measured uploads:
            // equal but for noise when nothing leaks, apart by the leak × half the uploads when something does.
            "firstHalfMaxRssKiB": state.residentKiB.prefix(state.residentKiB.count / 2).max() ?? 0,
            "secondHalfMaxRssKiB": state.residentKiB.suffix(state.residentKiB.count - state.residentKiB.count / 2).max() ?? 0,
        ]
        let json = try JSONSerialization.data(withJSONObject: result, options: [.sortedKeys])
        print(String(decoding: json, as: UTF8.self))
    }

    /// A field of /proc/self/status in KiB (0 when unavailable).
    static func status(_ field: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            return Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" })[1]) ?? 0
        }
        return 0
    }

    /// User + system CPU time of the whole process.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}

/// The shared counters of the uploader threads, behind one lock.
final class RunState: @unchecked Sendable {
    private let lock = NSCondition()
    private var remaining: Int
    private var finished = 0
    private(set) var latencies: [UInt64] = []
    /// VmRSS after each upload, in completion order.
    private(set) var residentKiB: [Int] = []

    init(limit: Int) { self.remaining = limit }

    /// Takes one upload from the budget; false when it is spent.
    func claim() -> Bool {
        self.lock.lock()
        defer { self.lock.unlock() }
        guard self.remaining > 0 else { return false }
        self.remaining -= 1
        return true
    }

    func record(_ nanoseconds: UInt64, residentKiB: Int) {
        self.lock.lock()
        self.latencies.append(nanoseconds)
        self.residentKiB.append(residentKiB)
        self.lock.unlock()
    }

    func finish() {
        self.lock.lock()
        self.finished += 1
        self.lock.broadcast()
        self.lock.unlock()
    }

    func waitForAll(_ count: Int) {
        self.lock.lock()
        while self.finished < count { self.lock.wait() }
        self.lock.unlock()
    }
}
