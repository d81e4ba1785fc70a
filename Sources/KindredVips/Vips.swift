internal import CVips

/// A libvips failure: the operation's name and libvips's message (taken from its error buffer, which is then
/// cleared). The message can describe the upload; it is for logs, never for clients.
struct VipsError: Error, Sendable, CustomStringConvertible {
    var operation: String
    var detail: String

    var description: String { "VipsError(\(self.operation): \(self.detail))" }

    /// Takes and clears libvips's error buffer. The buffer is one per process, so under concurrency it can also
    /// hold another pipeline's message; it is a diagnostic only.
    static func take(_ operation: String) -> VipsError {
        guard let copy = kindred_vips_take_error() else {
            return VipsError(operation: operation, detail: "")
        }
        defer { g_free(copy) }
        var detail = Substring(String(cString: copy))
        while let last = detail.last, last.isWhitespace { detail.removeLast() }
        return VipsError(operation: operation, detail: String(detail))
    }
}

/// libvips, started once per process (see `kindred_vips_start`: no operation cache, one worker thread per
/// pipeline, untrusted operations and every loader but the four allowed blocked). libvips is thread-safe after
/// this.
enum VipsRuntime {
    /// Runs `VIPS_INIT` on first use; Swift initialises a global exactly once, even under concurrency.
    private static let started: Bool = kindred_vips_start() == 0

    /// Starts libvips if needed; a failure (no memory, a broken installation) is not recoverable.
    static func start() {
        guard started else {
            preconditionFailure("libvips failed to start: \(VipsError.take("vips_init").detail)")
        }
    }

    /// The loader class libvips's own sniffing load used for `bytes`, nil when the load failed: every loader but
    /// the four allowed is blocked. The pipeline never loads this way; tests use it to prove the block is in force.
    static func sniffingLoad(_ bytes: [UInt8]) -> String? {
        start()
        return bytes.withUnsafeBytes { buffer in
            kindred_vips_sniffing_load(buffer.baseAddress, buffer.count).map { String(cString: $0) }
        }
    }
}

/// One reference to a `VipsImage` (a GObject), released in `deinit`. Operations return new images that hold
/// references to their inputs, so a chain stays alive as long as its last image does.
final class VipsImageRef {
    private var pointer: UnsafeMutablePointer<VipsImage>?

    /// Takes over the reference `pointer` carries (as libvips operations hand out).
    private init(takingOwnership pointer: UnsafeMutablePointer<VipsImage>) {
        self.pointer = pointer
    }

    deinit {
        if let pointer = self.pointer {
            g_object_unref(gpointer(pointer))
        }
        self.pointer = nil
    }

    private var image: UnsafeMutablePointer<VipsImage> {
        guard let pointer = self.pointer else { preconditionFailure("VipsImageRef used after release") }
        return pointer
    }

    var size: PixelSize { PixelSize(Int(vips_image_get_width(self.image)), Int(vips_image_get_height(self.image))) }
    var bands: Int { Int(vips_image_get_bands(self.image)) }
    var hasAlpha: Bool { vips_image_hasalpha(self.image) != 0 }
    var hasICCProfile: Bool { kindred_vips_has_icc_profile(self.image) != 0 }
    /// The EXIF orientation from the header, 1...8 (1 when absent).
    var orientation: Int { Int(kindred_vips_orientation(self.image)) }
    /// The names of every header field (basic properties and metadata such as "exif-data", "icc-profile-data").
    var fieldNames: [String] {
        guard let fields = vips_image_get_fields(self.image) else { return [] }
        defer { g_strfreev(fields) }
        var names: [String] = []
        var index = 0
        while let field = fields[index] {
            names.append(String(cString: field))
            index += 1
        }
        return names
    }

    /// Opens `buffer` with the loader of `format` (the header only; pixels decode when pulled). The buffer must
    /// stay valid until this image and every image made from it are released.
    static func load(_ buffer: UnsafeRawBufferPointer, as format: PhotoSourceFormat, shrink: Int) throws(VipsError)
        -> VipsImageRef
    {
        VipsRuntime.start()
        let code: Int32 =
            switch format {
            case .jpeg: Int32(KINDRED_VIPS_JPEG)
            case .png: Int32(KINDRED_VIPS_PNG)
            case .webp: Int32(KINDRED_VIPS_WEBP)
            case .heif: Int32(KINDRED_VIPS_HEIF)
            }
        var out: UnsafeMutablePointer<VipsImage>?
        guard kindred_vips_load(code, buffer.baseAddress, buffer.count, Int32(shrink), &out) == 0, let out else {
            throw VipsError.take("load")
        }
        return VipsImageRef(takingOwnership: out)
    }

    /// Runs one libvips operation that makes a new image from this one.
    private func derive(
        _ operation: String,
        _ body: (UnsafeMutablePointer<VipsImage>, UnsafeMutablePointer<UnsafeMutablePointer<VipsImage>?>) -> Int32
    ) throws(VipsError) -> VipsImageRef {
        var out: UnsafeMutablePointer<VipsImage>?
        guard body(self.image, &out) == 0, let out else {
            throw VipsError.take(operation)
        }
        return VipsImageRef(takingOwnership: out)
    }

    func extractArea(_ rect: PixelRect) throws(VipsError) -> VipsImageRef {
        try self.derive("extract_area") {
            kindred_vips_extract_area(
                $0, $1, Int32(rect.left), Int32(rect.top), Int32(rect.size.width), Int32(rect.size.height))
        }
    }

    /// Resamples to exactly `target`: libvips rounds the scaled size, so a pixel too many is cut and a pixel
    /// too few is filled by repeating the edge.
    func resize(to target: PixelSize) throws(VipsError) -> VipsImageRef {
        let current = self.size
        if current == target { return self }
        let hscale = Double(target.width) / Double(current.width)
        let vscale = Double(target.height) / Double(current.height)
        var resized = try self.derive("resize") { kindred_vips_resize($0, $1, hscale, vscale) }
        let got = resized.size
        if got.width > target.width || got.height > target.height {
            resized = try resized.extractArea(
                PixelRect(left: 0, top: 0, size: PixelSize(min(got.width, target.width), min(got.height, target.height))))
        }
        if resized.size != target {
            resized = try resized.derive("embed") {
                kindred_vips_embed_copy($0, $1, Int32(target.width), Int32(target.height))
            }
        }
        return resized
    }

    /// Decodes the whole pipeline up to here into memory (this is where decoding errors surface).
    func copyMemory() throws(VipsError) -> VipsImageRef {
        guard let out = vips_image_copy_memory(self.image) else { throw VipsError.take("copy_memory") }
        return VipsImageRef(takingOwnership: out)
    }

    func autorotate() throws(VipsError) -> VipsImageRef {
        try self.derive("autorot") { kindred_vips_autorot($0, $1) }
    }

    /// 8-bit sRGB without alpha: the embedded ICC profile applied when there is one (falling back to a plain
    /// colourspace conversion if the profile is unusable), alpha composed on white.
    func toOpaqueSRGB() throws(VipsError) -> VipsImageRef {
        var image = self
        if self.hasICCProfile, let converted = try? self.derive("icc_transform", { kindred_vips_icc_to_srgb($0, $1) }) {
            image = converted
        } else {
            image = try image.derive("colourspace") { kindred_vips_colourspace_srgb($0, $1) }
        }
        if image.hasAlpha {
            image = try image.derive("flatten") { kindred_vips_flatten_white($0, $1) }
        }
        return try image.derive("cast") { kindred_vips_cast_uchar($0, $1) }
    }

    /// A copy whose header holds no metadata at all (EXIF, XMP, IPTC, ICC, PNG text, orientation).
    func withoutMetadata() throws(VipsError) -> VipsImageRef {
        try self.derive("remove_metadata") { kindred_vips_remove_metadata($0, $1) }
    }

    /// Encodes JPEG at `quality` without metadata.
    func jpeg(quality: Int, progressive: Bool) throws(VipsError) -> [UInt8] {
        try self.save("jpegsave") { kindred_vips_jpegsave($0, $1, $2, Int32(quality), progressive ? 1 : 0) }
    }

    /// Encodes lossy WebP at `quality` without metadata.
    func webp(quality: Int, effort: Int) throws(VipsError) -> [UInt8] {
        try self.save("webpsave") { kindred_vips_webpsave($0, $1, $2, Int32(quality), Int32(effort)) }
    }

    private func save(
        _ operation: String,
        _ body: (
            UnsafeMutablePointer<VipsImage>, UnsafeMutablePointer<UnsafeMutableRawPointer?>,
            UnsafeMutablePointer<Int>
        ) -> Int32
    ) throws(VipsError) -> [UInt8] {
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        guard body(self.image, &buffer, &length) == 0, let buffer else {
            throw VipsError.take(operation)
        }
        defer { g_free(buffer) }
        return Array(UnsafeRawBufferPointer(start: buffer, count: length))
    }
}
