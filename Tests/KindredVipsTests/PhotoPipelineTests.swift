import Foundation
import KindredTestSupport
import Testing

@testable import KindredVips

/// Test inputs made by python/make_images.py (Pillow, piexif, pillow-heif) once per test run, in a temporary folder.
enum Fixtures {
    struct Generated: Sendable {
        var folder: String
        /// Which fixtures the generator could make (HEIC needs pillow-heif's encoder).
        var available: Set<String>
    }

    /// Made once per process, awaited (never waited for on a cooperative thread: see KindredTestSupport).
    static let made = Task { () throws -> Generated in
        let folder = NSTemporaryDirectory() + "kindred-vips-\(UUID().uuidString)"
        let output = try await Python.run("make_images.py", [folder])
        let made = (try? JSONSerialization.jsonObject(with: Data(output.utf8))) as? [String: Any] ?? [:]
        return Generated(folder: folder, available: Set(made.compactMap { $0.value is Int ? $0.key : nil }))
    }

    static func folder() async throws -> String {
        try await made.value.folder
    }

    static func bytes(_ name: String) async throws -> [UInt8] {
        let folder = try await made.value.folder
        return [UInt8](try #require(FileManager.default.contents(atPath: folder + "/" + name)))
    }

    static func isAvailable(_ name: String) async -> Bool {
        (try? await made.value.available.contains(name)) ?? false
    }
}

struct PythonFailure: Error, CustomStringConvertible {
    var description: String
}

/// Runs the scripts in python/ (python3 with Pillow, piexif, exifread, pillow-heif: services/install-deps.sh).
enum Python {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("python")

    /// The script's stdout; throws when it exits non-zero, with its output. Runs off the cooperative pool.
    static func run(_ script: String, _ arguments: [String], allowFailure: Bool = false) async throws -> String {
        let result: ProcessOutput
        do {
            result = try await runPython(folder.appendingPathComponent(script).path, arguments)
        } catch {
            throw PythonFailure(description: "cannot start python3: \(error)")
        }
        guard result.status == 0 || allowFailure else {
            throw PythonFailure(description: "\(script) exited \(result.status): \(result.text)\(result.errorText)")
        }
        return result.text
    }
}

/// What `check_images.py` must see in every rendition of a source.
struct Accepted: Sendable, CustomTestStringConvertible {
    var file: String
    var source: PhotoSourceFormat
    /// The displayed size (after the EXIF orientation).
    var sourceSize: (Int, Int)
    /// The true size of each standard rendition, largest first.
    var sizes: [(Int, Int)]
    /// The picture check_images.py expects (see its docstring).
    var expect: String

    var testDescription: String { self.file }

    static let standardSizes = [(1080, 1350), (640, 800), (320, 400), (84, 105)]
}

/// The pipeline end to end on real files, judged by Pillow and exifread.
@Suite struct PhotoPipelineTests {
    static let accepted: [Accepted] = [
        // Stored 1600×1200 with orientation 6, GPS, XMP and IPTC: displayed 1200×1600, red on top.
        Accepted(file: "gps-orientation6.jpg", source: .jpeg, sourceSize: (1200, 1600), sizes: Accepted.standardSizes, expect: "red-top"),
        // Text chunks, eXIf with GPS, an ICC profile; smaller than 1080×1350, so the largest rendition is the source.
        Accepted(
            file: "text-icc.png", source: .png, sourceSize: (1000, 1250),
            sizes: [(1000, 1250), (640, 800), (320, 400), (84, 105)], expect: "red-top"),
        Accepted(
            file: "alpha.png", source: .png, sourceSize: (800, 1000),
            sizes: [(800, 1000), (640, 800), (320, 400), (84, 105)], expect: "red-top-white"),
        // Stored 1500×1200 with EXIF orientation 6 and XMP.
        Accepted(file: "exif.webp", source: .webp, sourceSize: (1200, 1500), sizes: Accepted.standardSizes, expect: "red-top"),
        Accepted(
            file: "photo.heic", source: .heif, sourceSize: (1000, 1250),
            sizes: [(1000, 1250), (640, 800), (320, 400), (84, 105)], expect: "red-top"),
        Accepted(
            file: "orientation6.heic", source: .heif, sourceSize: (400, 500),
            sizes: [(400, 500), (400, 500), (320, 400), (84, 105)], expect: "red-top"),
        Accepted(file: "progressive.jpg", source: .jpeg, sourceSize: (2000, 2500), sizes: Accepted.standardSizes, expect: "red-top"),
        Accepted(file: "interlaced.png", source: .png, sourceSize: (1200, 1500), sizes: Accepted.standardSizes, expect: "red-top"),
        // 500×500: never upscaled; the largest 4:5 crop is 400×500.
        Accepted(
            file: "small.jpg", source: .jpeg, sourceSize: (500, 500),
            sizes: [(400, 500), (400, 500), (320, 400), (84, 105)], expect: "red-top"),
        Accepted(
            file: "padded.jpg", source: .jpeg, sourceSize: (500, 500),
            sizes: [(400, 500), (400, 500), (320, 400), (84, 105)], expect: "red-top"),
        Accepted(
            file: "grey16.png", source: .png, sourceSize: (400, 500),
            sizes: [(400, 500), (400, 500), (320, 400), (84, 105)], expect: "grey"),
        Accepted(
            file: "cmyk.jpg", source: .jpeg, sourceSize: (400, 500),
            sizes: [(400, 500), (400, 500), (320, 400), (84, 105)], expect: "reddish-top"),
    ]

    @Test(arguments: accepted)
    func renditionsAreCleanUprightAndTrueToSize(_ input: Accepted) async throws {
        if input.source == .heif, await !Fixtures.isAvailable(input.file) {
            return  // pillow-heif cannot encode HEIC on this machine; reported by the generator's output
        }
        let bytes = try await Fixtures.bytes(input.file)
        let photo = try await offThePool { try PhotoPipeline().process(bytes) }
        #expect(photo.source == input.source)
        #expect(photo.sourceWidth == input.sourceSize.0 && photo.sourceHeight == input.sourceSize.1)
        #expect(photo.renditions.map(\.spec) == RenditionSpec.standard.flatMap { [$0, $0] })
        #expect(photo.renditions.map(\.format) == Array(repeating: [PhotoFormat.jpeg, .webp], count: 4).flatMap { $0 })
        #expect(photo.renditions.map { [$0.width, $0.height] } == input.sizes.flatMap { [[$0.0, $0.1], [$0.0, $0.1]] })
        #expect(photo.renditions.map(\.contentType) == Array(repeating: ["image/jpeg", "image/webp"], count: 4).flatMap { $0 })

        // Write every rendition and let the independent reader judge the bytes.
        let folder = try await Fixtures.folder() + "/out-\(input.file)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var manifest: [[String: Any]] = []
        for rendition in photo.renditions {
            let path = "\(folder)/\(rendition.spec.name).\(rendition.format.rawValue)"
            try Data(rendition.bytes).write(to: URL(fileURLWithPath: path))
            manifest.append([
                "path": path, "format": rendition.format.rawValue, "width": rendition.width, "height": rendition.height,
                "expect": input.expect,
            ])
        }
        let verdict = try await Self.check(manifest, in: folder)
        #expect(verdict.ok, "\(verdict.problems)")
        #expect(verdict.checked == 8)
    }

    /// The checker is not vacuous: on an upload itself (metadata, unrotated pixels) it reports problems.
    @Test func checkerRejectsTheOriginalUpload() async throws {
        let folder = try await Fixtures.folder()
        let verdict = try await Self.check(
            [["path": folder + "/gps-orientation6.jpg", "format": "jpeg", "width": 1200, "height": 1600, "expect": "red-top"]],
            in: folder + "/original"
        )
        #expect(!verdict.ok)
        #expect(verdict.problems.contains { $0.contains("exifread found") && $0.contains("GPS") })
        #expect(verdict.problems.contains { $0.contains("KINDRED-SECRET") })
        #expect(verdict.problems.contains { $0.contains("expected red over blue") })
    }

    struct Verdict: Decodable {
        var ok: Bool
        var checked: Int
        var problems: [String]
    }

    static func check(_ manifest: [[String: Any]], in folder: String) async throws -> Verdict {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = folder + "/manifest.json"
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: path))
        let output = try await Python.run("check_images.py", [path], allowFailure: true)
        return try JSONDecoder().decode(Verdict.self, from: Data(output.utf8))
    }

    @Test(arguments: [
        ("bomb.png", PhotoRejection.Reason.tooManyPixels),  // 30000×30000 declared in a 1.5 KB file
        ("truncated.jpg", PhotoRejection.Reason.truncated),
        ("truncated.png", PhotoRejection.Reason.truncated),
        ("polyglot.jpg", PhotoRejection.Reason.trailingData),  // JPEG + ZIP
        ("polyglot.png", PhotoRejection.Reason.trailingData),  // PNG + PHP
        ("garbage.jpg", PhotoRejection.Reason.corruptImage),  // a sound container with undecodable data
        ("image.svg", PhotoRejection.Reason.unsupportedFormat),
        ("image.tiff", PhotoRejection.Reason.unsupportedFormat),
        ("image.gif", PhotoRejection.Reason.unsupportedFormat),
        ("document.pdf", PhotoRejection.Reason.unsupportedFormat),
        ("random.bin", PhotoRejection.Reason.unsupportedFormat),
        ("empty.bin", PhotoRejection.Reason.empty),
    ])
    func refused(file: String, reason: String) async throws {
        let bytes = try await Fixtures.bytes(file)
        #expect(throws: PhotoRejection.self) { try PhotoPipeline().process(bytes) }
        do {
            _ = try PhotoPipeline().process(bytes)
        } catch {
            #expect(error.reason == reason)
            #expect(!error.message.isEmpty && !error.message.contains("vips"))
        }
    }

    /// Bytes that pass the magic check but are something else or damaged inside.
    @Test func disguisedAndDamagedFilesAreRefused() async throws {
        let png = try await Fixtures.bytes("alpha.png")
        let tiff = try await Fixtures.bytes("image.tiff")
        // A TIFF behind a PNG signature: the walk finds no IHDR (libvips would have sniffed tiffload).
        #expect(await Self.reason(Array(png.prefix(8)) + tiff) == PhotoRejection.Reason.corruptImage)
        // One flipped byte inside IDAT: libpng's CRC check fails the decode (fail_on=warning).
        var damaged = png
        let idat = try #require(Self.find(Array("IDAT".utf8), in: png))
        damaged[idat + 40] ^= 0x55
        #expect(await Self.reason(damaged) == PhotoRejection.Reason.corruptImage)
        // A JPEG's SOI followed by a PNG: "PN" read as a segment length runs past the end.
        #expect(await Self.reason([0xFF, 0xD8, 0xFF] + png) == PhotoRejection.Reason.truncated)
    }

    @Test func limitsComeFromTheHeader() async throws {
        let jpeg = try await Fixtures.bytes("gps-orientation6.jpg")  // stored 1600×1200
        #expect(await Self.reason(jpeg, PhotoLimits(maxBytes: jpeg.count - 1)) == PhotoRejection.Reason.tooLarge)
        #expect(await Self.reason(jpeg, PhotoLimits(maxSide: 1599)) == PhotoRejection.Reason.tooManyPixels)
        #expect(await Self.reason(jpeg, PhotoLimits(maxPixels: 1600 * 1200 - 1)) == PhotoRejection.Reason.tooManyPixels)
        #expect(await Self.reason(jpeg, PhotoLimits(maxBytes: jpeg.count, maxPixels: 1600 * 1200, maxSide: 1600)) == nil)
    }

    /// A progressive JPEG or an interlaced PNG is held whole in memory by its decoder: a lower pixel limit.
    @Test func progressiveImagesHaveTheirOwnPixelLimit() async throws {
        let progressive = try await Fixtures.bytes("progressive-13mp.jpg")
        let interlaced = try await Fixtures.bytes("interlaced-13mp.png")
        let baseline = try await Fixtures.bytes("baseline-13mp.jpg")
        #expect(await Self.reason(progressive) == PhotoRejection.Reason.tooManyPixels)
        #expect(await Self.reason(interlaced) == PhotoRejection.Reason.tooManyPixels)
        #expect(await Self.reason(baseline) == nil)
        let limits = PhotoLimits(maxProgressivePixels: 4000 * 3200)
        #expect(await Self.reason(progressive, limits) == nil)
        #expect(await Self.reason(interlaced, limits) == nil)
    }

    /// Every loader but the four allowed is blocked inside libvips too, so even its own sniffing finds none.
    @Test func libvipsLoadersOutsideTheAllowlistAreBlocked() async throws {
        _ = PhotoPipeline()
        #expect(VipsRuntime.sniffingLoad(try await Fixtures.bytes("small.jpg")) == "VipsForeignLoadJpegBuffer")
        #expect(VipsRuntime.sniffingLoad(try await Fixtures.bytes("alpha.png")) == "VipsForeignLoadPngBuffer")
        for file in ["image.tiff", "image.gif", "image.svg", "document.pdf"] {
            let bytes = try await Fixtures.bytes(file)
            #expect(VipsRuntime.sniffingLoad(bytes) == nil, "\(file)")
        }
    }

    /// Eight uploads at once give byte-identical results to one at a time.
    @Test func concurrentCallsAgreeWithSequentialOnes() async throws {
        let bytes = try await Fixtures.bytes("gps-orientation6.jpg")
        let pipeline = PhotoPipeline()
        let expected = try await offThePool { try pipeline.process(bytes).renditions.map(\.bytes) }
        let results = try await withThrowingTaskGroup(of: [[UInt8]].self) { group in
            for _ in 0..<8 {
                group.addTask { try await offThePool { try pipeline.process(bytes).renditions.map(\.bytes) } }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 8)
        #expect(results.allSatisfy { $0 == expected })
    }

    @Test func customRenditionsKeepTheirOwnAspect() async throws {
        let specs = [RenditionSpec(name: "square", width: 300, height: 300), RenditionSpec(name: "wide", width: 400, height: 200)]
        let bytes = try await Fixtures.bytes("gps-orientation6.jpg")
        let photo = try await offThePool { try PhotoPipeline(renditions: specs, quality: 70).process(bytes) }
        #expect(photo.renditions.map { "\($0.spec.name) \($0.width)x\($0.height)" } == [
            "square 300x300", "square 300x300", "wide 400x200", "wide 400x200",
        ])
    }

    static func reason(_ bytes: [UInt8], _ limits: PhotoLimits = .standard) async -> String? {
        do {
            _ = try await offThePool { try PhotoPipeline(limits: limits).process(bytes) }
            return nil
        } catch let error as PhotoRejection {
            return error.reason
        } catch {
            return "unexpected: \(error)"
        }
    }

    static func find(_ needle: [UInt8], in bytes: [UInt8]) -> Int? {
        guard bytes.count >= needle.count else { return nil }
        return (0...(bytes.count - needle.count)).first { bytes[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
}
