/// Turns an untrusted photo upload into clean renditions with libvips.
///
/// In order: the byte limit; the format from the magic bytes (JPEG, PNG, WebP, HEIF — anything else refused);
/// a walk over the container to its end (truncated files and data after the image refused, see
/// `PhotoContainer`); the header through that format's own loader (never libvips's sniffing loader) and the pixel
/// limits from it, before any pixel is decoded; then one decode with fail-on-warning at the smallest scale the
/// largest rendition needs (JPEG's DCT shrink-on-load, WebP's scale-on-load), a centred cover crop, resampling,
/// rotation by the EXIF orientation, conversion to 8-bit sRGB (ICC profile applied, alpha composed on white) and
/// removal of every metadata field. Each smaller rendition is cut from the smallest image already made that holds
/// it, and each is encoded as JPEG and WebP; the encoded bytes are scrubbed of metadata once more
/// (`MetadataScrubber`).
///
/// `process` is synchronous and CPU-bound (about 180 ms of CPU for a 12 MP JPEG, README: Performance): run it off
/// the event loop and bound how many run at once (about 2 × cores; each call holds ~20 MB while it runs). It is
/// safe to call from several threads; each call uses one libvips worker thread.
public struct PhotoPipeline: Sendable {
    public var limits: PhotoLimits
    /// The renditions to make, each cover-cropped to its own aspect ratio.
    public var renditions: [RenditionSpec]
    /// JPEG and WebP quality, 1...100.
    public var quality: Int
    /// WebP encoder effort, 0 (fastest) ... 6 (smallest). 2, not libvips's default 4: on a 12 MP upload effort 4
    /// costs about 100 ms more CPU for about 1 % fewer bytes (README, Performance).
    public var webpEffort: Int = 2
    /// Progressive JPEG (slightly smaller above ~10 KB, renders coarse-to-fine); baseline by default.
    public var progressiveJPEG: Bool = false

    public init(limits: PhotoLimits = .standard, renditions: [RenditionSpec] = RenditionSpec.standard, quality: Int = 80) {
        precondition(!renditions.isEmpty, "a photo pipeline needs at least one rendition")
        precondition((1...100).contains(quality), "quality is 1...100")
        self.limits = limits
        self.renditions = renditions
        self.quality = quality
        VipsRuntime.start()
    }

    /// The source format named by the first bytes of an upload (16 are enough), or nil when it is not on the
    /// allowlist. Magic bytes only: a later `process` still checks the whole file.
    public static func sniff(_ prefix: some Collection<UInt8>) -> PhotoSourceFormat? {
        PhotoContainer.sniff(prefix)
    }

    /// Checks, decodes and re-encodes one upload into every rendition × [JPEG, WebP].
    public func process(_ data: [UInt8]) throws(PhotoRejection) -> ProcessedPhoto {
        guard !data.isEmpty else { throw .empty }
        guard data.count <= self.limits.maxBytes else { throw .tooLarge(self.limits.maxBytes) }
        guard let format = Self.sniff(data) else { throw .unsupportedFormat }
        if let rejection = PhotoContainer.check(data, as: format) { throw rejection }
        let progressive = PhotoContainer.isProgressive(data, as: format)
        let result: Result<ProcessedPhoto, PhotoRejection> = data.withUnsafeBytes { buffer in
            do {
                return .success(try self.decodeAndEncode(buffer, as: format, progressive: progressive))
            } catch let error as PhotoRejection {
                return .failure(error)
            } catch let error as VipsError {
                return .failure(.corruptImage(error))
            } catch {
                preconditionFailure("unexpected error \(error)")
            }
        }
        return try result.get()
    }

    /// Everything after the container checks; `buffer` outlives every image made here.
    private func decodeAndEncode(_ buffer: UnsafeRawBufferPointer, as format: PhotoSourceFormat, progressive: Bool)
        throws -> ProcessedPhoto
    {
        let header = try VipsImageRef.load(buffer, as: format, shrink: 1)
        let stored = header.size
        guard stored.width <= self.limits.maxSide, stored.height <= self.limits.maxSide,
            stored.width * stored.height <= self.limits.maxPixels
        else {
            throw PhotoRejection.tooManyPixels(self.limits)
        }
        if progressive, stored.width * stored.height > self.limits.maxProgressivePixels {
            throw PhotoRejection.tooManyProgressivePixels(self.limits)
        }
        // Orientations 5...8 turn the image a quarter: the displayed size is the stored one transposed.
        let transposed = (5...8).contains(header.orientation)
        let source = transposed ? stored.transposed : stored

        let base = try self.decodeLargest(header, buffer: buffer, format: format, source: source, transposed: transposed)

        var renditions: [Rendition] = []
        renditions.reserveCapacity(self.renditions.count * 2)
        // Each rendition is cut from the smallest image made so far that still holds it (640×800 from 1080×1350,
        // 320×400 from 640×800, ...): fewer pixels to resample than going back to the base every time.
        var made = [base]
        for spec in self.renditions {
            let target = PixelSize(spec.width, spec.height)
            let output = RenditionGeometry.outputSize(source: source, spec: target)
            let from = made.filter { image in
                let crop = RenditionGeometry.coverCrop(of: image.size, aspect: target)
                return crop.width >= output.width && crop.height >= output.height
            }.min { $0.size.width * $0.size.height < $1.size.width * $1.size.height } ?? base
            var image = from
            let crop = RenditionGeometry.coverCrop(of: from.size, aspect: target)
            if output != from.size || crop != from.size {
                image = try from.extractArea(RenditionGeometry.centred(crop, in: from.size))
                    .resize(to: output)
                    .copyMemory()
                made.append(image)
            }
            let (jpeg, webp) = try self.encode(image)
            let size = image.size
            renditions.append(Rendition(spec: spec, format: .jpeg, width: size.width, height: size.height, bytes: jpeg))
            renditions.append(Rendition(spec: spec, format: .webp, width: size.width, height: size.height, bytes: webp))
        }
        return ProcessedPhoto(source: format, sourceWidth: source.width, sourceHeight: source.height, renditions: renditions)
    }

    /// The JPEG and WebP of one rendition, scrubbed. The image is decoded already, so a failure here is ours, not
    /// the upload's: `PROCESSING_FAILED`.
    private func encode(_ image: VipsImageRef) throws(PhotoRejection) -> (jpeg: [UInt8], webp: [UInt8]) {
        do {
            let jpeg = try image.jpeg(quality: self.quality, progressive: self.progressiveJPEG)
            let webp = try image.webp(quality: self.quality, effort: min(max(self.webpEffort, 0), 6))
            return (try MetadataScrubber.jpeg(jpeg), try MetadataScrubber.webp(webp))
        } catch let error as VipsError {
            throw .processingFailed(error.description)
        } catch let error as MetadataScrubber.Malformed {
            throw .processingFailed(error.description)
        } catch {
            throw .processingFailed("\(error)")
        }
    }

    /// The largest rendition as an upright, metadata-free, 8-bit sRGB image in memory, decoded once at the
    /// smallest scale it needs.
    private func decodeLargest(
        _ header: VipsImageRef,
        buffer: UnsafeRawBufferPointer,
        format: PhotoSourceFormat,
        source: PixelSize,
        transposed: Bool
    ) throws -> VipsImageRef {
        guard let largest = self.renditions.max(by: { $0.width * $0.height < $1.width * $1.height }) else {
            preconditionFailure("renditions is never empty")
        }
        let aspect = PixelSize(largest.width, largest.height)
        let output = RenditionGeometry.outputSize(source: source, spec: aspect)
        let shrink: Int
        switch format {
        case .jpeg, .webp:
            shrink = RenditionGeometry.loadShrink(crop: RenditionGeometry.coverCrop(of: source, aspect: aspect), output: output)
        case .png, .heif:
            shrink = 1
        }
        let image = shrink == 1 ? header : try VipsImageRef.load(buffer, as: format, shrink: shrink)
        // Crop and scale in stored (unrotated) coordinates, so the decoder runs top to bottom once; rotate the
        // small result. A centred crop stays centred under any rotation or flip.
        let loaded = transposed ? image.size.transposed : image.size
        let crop = RenditionGeometry.coverCrop(of: loaded, aspect: aspect)
        let storedCrop = transposed ? crop.transposed : crop
        let storedOutput = transposed ? output.transposed : output
        return try image.extractArea(RenditionGeometry.centred(storedCrop, in: image.size))
            .resize(to: storedOutput)
            .copyMemory()
            .autorotate()
            .toOpaqueSRGB()
            .withoutMetadata()
            .copyMemory()
    }
}
