import Foundation
import KindredGRPC
@testable import KindredProfile
import KindredProto
import KindredServiceKit
import KindredServiceTesting
import Testing

/// Uploads through the real stream with images Pillow made (GPS tags, orientation 6, PNG text chunk, WebP), in
/// both photo stores.
@Suite(.serialized) struct PhotoTests {
    /// Pillow makes the images once per test process, in a child process awaited without blocking a thread (a
    /// blocked cooperative thread stalls every other test of the process).
    static let folder = NSTemporaryDirectory() + "kindred-upload-images-\(getpid())"
    static let generated = Task { () throws -> String in
        let folder = Self.folder
        atexit { try? FileManager.default.removeItem(atPath: PhotoTests.folder) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", TestServerSupport.repositoryRoot() + "/Tests/KindredProfileTests/python/make_upload_images.py", folder,
        ]
        process.standardInput = FileHandle.nullDevice
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        guard status == 0 else { throw CocoaError(.fileWriteUnknown) }
        return folder
    }

    static func images() async throws -> String {
        try await Self.generated.value
    }

    static func read(_ folder: String, _ name: String) -> [UInt8] {
        [UInt8](FileManager.default.contents(atPath: folder + "/" + name)!)
    }

    /// Uploads `bytes` in 64 KiB chunks; `declared` overrides the header's size.
    static func upload(
        _ h: ProfileHarness, _ user: ProfileHarness.User, _ bytes: [UInt8], type: String = "image/jpeg",
        key: String = "", declared: Int? = nil
    ) async throws -> V1.UploadPhotoResponse {
        try await h.client.clientStreaming(P.uploadPhoto, metadata: user.metadata) { writer in
            try await writer.write(
                .with {
                    $0.part = .header(
                        .with {
                            $0.contentType = type
                            $0.totalSizeBytes = Int64(declared ?? bytes.count)
                            $0.idempotencyKey = key
                            $0.position = 99
                        })
                })
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + 65_536)
                try await writer.write(.with { $0.part = .chunk(Array(bytes[offset..<end])) })
                offset = end
            }
        }
    }

    func containsText(_ bytes: [UInt8], _ text: String) -> Bool {
        let needle = Array(text.utf8)
        guard bytes.count >= needle.count else { return false }
        return (0...(bytes.count - needle.count)).contains { Array(bytes[$0..<($0 + needle.count)]) == needle }
    }

    func run(settings: [String: String]) async throws {
        let folder = try await Self.images()
        try await ProfileHarness.with(settings: settings) { h in
            let ada = h.user("dating")
            let bob = h.user("dating")
            let eve = h.user("bizmatch")
            try await h.createProfile(ada, h.datingFields("Ada"))
            try await h.createProfile(bob, h.datingFields("Bob"))
            try await h.createProfile(eve)
            let jpeg = Self.read(folder, "gps_orientation6.jpg")
            let first = try await Self.upload(h, ada, jpeg, key: "upload-1")
            let photo = first.photo!
            #expect(photo.width == 1080 && photo.height == 1350 && photo.position == 0 && photo.version == 1)
            // The same key again: the same photo, nothing stored twice.
            let retried = try await Self.upload(h, ada, jpeg, key: "upload-1")
            #expect(retried.photo!.photoId == photo.photoId && retried.photos.count == 1)
            let png = try await Self.upload(h, ada, Self.read(folder, "plain.png"), type: "image/png")
            let webp = try await Self.upload(h, ada, Self.read(folder, "small.webp"), type: "image/webp")
            #expect(webp.photos.map(\.photoId) == [photo.photoId, png.photo!.photoId, webp.photo!.photoId])
            #expect(webp.photo!.width == 720 && webp.photo!.height == 900)  // 4:5 crop of 900x900, never upscaled

            // Every rendition, both formats: sized, clean of metadata, upright (red on top after orientation 6).
            for (variant, size) in [(Kindred.Common.V1.PhotoVariant.full, (1080, 1350)), (.card, (640, 800)), (.thumbnail, (320, 400)), (.icon, (84, 105))] {
                for format in ["jpeg", "webp"] {
                    let got = try await h.client.unary(
                        P.getPhoto, .with { $0.photoId = photo.photoId; $0.variant = variant; $0.format = format },
                        metadata: ada.metadata)
                    #expect(Int(got.width) == size.0 && Int(got.height) == size.1, "\(variant) \(format)")
                    #expect(got.contentType == "image/\(format)" && !got.data.isEmpty && got.cacheMaxAgeSeconds == 31_536_000)
                    #expect(!containsText(got.data, "Exif") && !containsText(got.data, "KINDRED-SECRET"))
                    let again = try await h.client.unary(
                        P.getPhoto,
                        .with { $0.photoId = photo.photoId; $0.variant = variant; $0.format = format; $0.ifNoneMatch = got.etag },
                        metadata: ada.metadata)
                    #expect(again.notModified && again.data.isEmpty && again.etag == got.etag)
                }
            }
            let pngBytes = try await h.client.unary(
                P.getPhoto, .with { $0.photoId = png.photo!.photoId; $0.variant = .full }, metadata: ada.metadata
            ).data
            #expect(!containsText(pngBytes, "KINDRED-SECRET-TEXT"))

            // Visibility: Bob sees Ada's photos once Ada is eligible (2 photos); Eve (bizmatch) never does.
            #expect(await statusCode { _ = try await h.client.unary(P.getPhoto, .with { $0.photoId = photo.photoId }, metadata: eve.metadata) } == .notFound)
            #expect(try await h.client.unary(P.getPhoto, .with { $0.photoId = photo.photoId }, metadata: bob.metadata).data.count > 0)
            // Bob cannot delete or reorder Ada's photos.
            #expect(await statusCode { _ = try await h.client.unary(P.deletePhoto, .with { $0.photoId = photo.photoId }, metadata: bob.metadata) } == .notFound)
            #expect(await statusCode { _ = try await h.client.unary(P.reorderPhotos, .with { $0.photoIds = webp.photos.map(\.photoId) }, metadata: bob.metadata) } == .invalidArgument)

            // Refused inputs change nothing.
            for (name, type) in [("image.svg", "image/jpeg"), ("tiny.png", "image/png")] {
                #expect(await statusCode { _ = try await Self.upload(h, ada, Self.read(folder, name), type: type) } == .invalidArgument, "\(name)")
            }
            #expect(await failureReason { _ = try await Self.upload(h, ada, Array(jpeg.prefix(jpeg.count / 2))) } == "TRUNCATED")
            for (name, reason) in [
                ("bomb.png", "TOO_MANY_PIXELS"), ("polyglot.jpg", "TRAILING_DATA"), ("image.tiff", "UNSUPPORTED_FORMAT"),
                ("image.gif", "UNSUPPORTED_FORMAT"), ("image.svg", "UNSUPPORTED_FORMAT"),
            ] {
                #expect(await failureReason { _ = try await Self.upload(h, ada, Self.read(folder, name)) } == reason, "\(name)")
            }
            #expect(await failureReason { _ = try await Self.upload(h, ada, jpeg, declared: jpeg.count - 10) } == "UPLOAD_TOO_LARGE")
            let mismatch = await failureReason { _ = try await Self.upload(h, ada, jpeg, declared: jpeg.count + 10) }
            #expect(mismatch == "SIZE_MISMATCH", "\(String(describing: mismatch))")
            #expect(await statusCode { _ = try await Self.upload(h, ada, jpeg, declared: 15 * 1024 * 1024 + 1) } == .invalidArgument)
            #expect(try await h.client.unary(P.getProfile, .init(), metadata: ada.metadata).profile!.photos.count == 3)

            // Reorder, delete (idempotent), and the bytes leave the store.
            let order = [webp.photo!.photoId, photo.photoId, png.photo!.photoId]
            let reordered = try await h.client.unary(P.reorderPhotos, .with { $0.photoIds = order }, metadata: ada.metadata)
            #expect(reordered.photos.map(\.photoId) == order && reordered.photos.map(\.position) == [0, 1, 2])
            for _ in 0..<2 {
                let left = try await h.client.unary(P.deletePhoto, .with { $0.photoId = photo.photoId }, metadata: ada.metadata)
                #expect(left.photos.map(\.photoId) == [webp.photo!.photoId, png.photo!.photoId])
            }
            #expect(await statusCode { _ = try await h.client.unary(P.getPhoto, .with { $0.photoId = photo.photoId }, metadata: ada.metadata) } == .notFound)
            let footprint = try await h.footprint(ada.id)
            #expect(footprint["photos"] == 2 && footprint["photo_variants"] == 16 && footprint["photo_files"] == 16)
        }
    }

    @Test func inPostgres() async throws {
        try await self.run(settings: [:])
    }

    @Test func inAFolder() async throws {
        let folder = NSTemporaryDirectory() + "kindred-photo-store-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await self.run(settings: ["KINDRED_PROFILE_PHOTO_DIR": folder])
        #expect(try FolderPhotoBlobStorage(root: folder).fileCount() == 16)
    }

    @Test func thePhotoLimitOfTheCommunity() async throws {
        let folder = try await Self.images()
        try await ProfileHarness.with { h in
            let ada = h.user("dating")
            try await h.createProfile(ada)
            try await h.database.execute(
                "UPDATE communities SET settings = \(try CommunityPresets.dating.settings!.with { $0.minPhotos = 1; $0.maxPhotos = 1 }.serializedBytes()) WHERE id = 'dating'")
            _ = try await Self.upload(h, ada, Self.read(folder, "small.webp"), type: "image/webp")
            #expect(await failureReason { _ = try await Self.upload(h, ada, Self.read(folder, "small.webp"), type: "image/webp") } == "PHOTO_LIMIT_REACHED")
        }
    }
}

extension Kindred.Common.V1.CommunitySettings {
    func with(_ change: (inout Self) -> Void) -> Self {
        var copy = self
        change(&copy)
        return copy
    }
}
