/// Limits checked before any pixel is decoded: the byte size first, then the dimensions from the header.
public struct PhotoLimits: Sendable, Hashable {
    /// The largest upload accepted, in bytes (default 15 MiB).
    public var maxBytes: Int
    /// The most pixels (width × height, from the header) accepted (default 40 megapixels).
    public var maxPixels: Int
    /// The longest side accepted, in pixels (default 12,000), so a 40 MP image 100,000 pixels wide is refused.
    public var maxSide: Int
    /// The most pixels of a progressive JPEG or an interlaced (Adam7) PNG (default 12 megapixels). Their decoders
    /// hold the whole image until the last pass — libjpeg every DCT coefficient (3–6 bytes a pixel), libpng every
    /// row (up to 8 bytes a pixel) — where baseline JPEG and plain PNG stream in a few MB. Phones write neither.
    public var maxProgressivePixels: Int

    public init(
        maxBytes: Int = 15 * 1024 * 1024,
        maxPixels: Int = 40_000_000,
        maxSide: Int = 12_000,
        maxProgressivePixels: Int = 12_000_000
    ) {
        self.maxBytes = maxBytes
        self.maxPixels = maxPixels
        self.maxSide = maxSide
        self.maxProgressivePixels = maxProgressivePixels
    }

    /// 15 MiB, 40 megapixels, 12,000 pixels a side, progressive JPEG and interlaced PNG 12 megapixels.
    public static let standard = PhotoLimits()
}

/// The formats renditions are encoded in.
public enum PhotoFormat: String, Sendable, CaseIterable {
    case jpeg
    case webp

    /// The HTTP `Content-Type` of this format.
    public var contentType: String {
        switch self {
        case .jpeg: "image/jpeg"
        case .webp: "image/webp"
        }
    }
}

/// The formats accepted as uploads (the loader allowlist), recognised by their magic bytes.
public enum PhotoSourceFormat: String, Sendable, CaseIterable {
    case jpeg
    case png
    case webp
    /// HEIF with an HEVC image (iPhone HEIC), brands `heic`, `heix`, `heim`, `heis`, `hevc`, `hevx`, `mif1`, `msf1`.
    case heif
}

/// One rendition size: the output is cover-cropped (centred) to this aspect ratio and scaled down to this size.
public struct RenditionSpec: Sendable, Hashable {
    /// A stable name used in storage keys and URLs, e.g. "640x800".
    public var name: String
    public var width: Int
    public var height: Int

    public init(name: String, width: Int, height: Int) {
        precondition(width > 0 && height > 0, "a rendition needs a positive size")
        self.name = name
        self.width = width
        self.height = height
    }

    /// The 4:5 portrait sizes of the apps' cards and thumbnails, largest first:
    /// 1080×1350, 640×800, 320×400, 84×105.
    public static let standard: [RenditionSpec] = [
        RenditionSpec(name: "1080x1350", width: 1080, height: 1350),
        RenditionSpec(name: "640x800", width: 640, height: 800),
        RenditionSpec(name: "320x400", width: 320, height: 400),
        RenditionSpec(name: "84x105", width: 84, height: 105),
    ]
}

/// One encoded rendition. `width` and `height` are the true size of the encoded image: the spec's size, or
/// smaller (same aspect ratio) when the source is too small, because the pipeline never upscales.
public struct Rendition: Sendable {
    public var spec: RenditionSpec
    public var format: PhotoFormat
    public var width: Int
    public var height: Int
    /// The encoded image, without any metadata.
    public var bytes: [UInt8]
    /// `image/jpeg` or `image/webp`.
    public var contentType: String

    public init(spec: RenditionSpec, format: PhotoFormat, width: Int, height: Int, bytes: [UInt8]) {
        self.spec = spec
        self.format = format
        self.width = width
        self.height = height
        self.bytes = bytes
        self.contentType = format.contentType
    }
}

/// The result of processing one upload.
public struct ProcessedPhoto: Sendable {
    /// The format the upload was decoded as.
    public var source: PhotoSourceFormat
    /// The upload's size as displayed, i.e. after applying its EXIF orientation.
    public var sourceWidth: Int
    public var sourceHeight: Int
    /// Every spec × [.jpeg, .webp], in spec order, JPEG before WebP.
    public var renditions: [Rendition]

    public init(source: PhotoSourceFormat, sourceWidth: Int, sourceHeight: Int, renditions: [Rendition]) {
        self.source = source
        self.sourceWidth = sourceWidth
        self.sourceHeight = sourceHeight
        self.renditions = renditions
    }
}

/// Why an upload was refused. `reason` is a stable UPPER_SNAKE code for clients and metrics; `message` is a fixed,
/// safe sentence (it never contains decoder output or bytes of the upload).
public struct PhotoRejection: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public var message: String
    /// For logs only: libvips's message when the decoder refused the image (empty otherwise). It can describe the
    /// upload's bytes, so it never goes to clients; it is not part of equality.
    public var detail: String

    public init(reason: String, message: String, detail: String = "") {
        self.reason = reason
        self.message = message
        self.detail = detail
    }

    public static func == (lhs: PhotoRejection, rhs: PhotoRejection) -> Bool {
        lhs.reason == rhs.reason && lhs.message == rhs.message
    }

    public var description: String { "PhotoRejection(\(self.reason): \(self.message))" }

    /// The reason codes, as constants.
    public enum Reason {
        /// No bytes at all.
        public static let empty = "EMPTY"
        /// More bytes than `PhotoLimits.maxBytes`.
        public static let tooLarge = "TOO_LARGE"
        /// Not JPEG, PNG, WebP or HEIF by its magic bytes (TIFF, GIF, SVG, PDF, random bytes, ...).
        public static let unsupportedFormat = "UNSUPPORTED_FORMAT"
        /// The header declares more pixels than `maxPixels` (`maxProgressivePixels` for a progressive JPEG or an
        /// interlaced PNG) or a side longer than `maxSide`.
        public static let tooManyPixels = "TOO_MANY_PIXELS"
        /// The file ends before its format's end marker (JPEG EOI, PNG IEND, the RIFF size, an ISO BMFF box).
        public static let truncated = "TRUNCATED"
        /// Bytes other than padding follow the image's end (e.g. a ZIP appended to a JPEG: a polyglot).
        public static let trailingData = "TRAILING_DATA"
        /// The structure or the compressed data is invalid, or the decoder warned.
        public static let corruptImage = "CORRUPT_IMAGE"
        /// Not the upload's fault: encoding a decoded image failed, or the encoder wrote something the metadata
        /// scrubber does not recognise (a server error: map it to INTERNAL, log `detail`).
        public static let processingFailed = "PROCESSING_FAILED"
    }

    static let empty = PhotoRejection(reason: Reason.empty, message: "the upload is empty")
    static func tooLarge(_ limit: Int) -> PhotoRejection {
        PhotoRejection(reason: Reason.tooLarge, message: "the upload exceeds \(limit) bytes")
    }
    static let unsupportedFormat = PhotoRejection(
        reason: Reason.unsupportedFormat,
        message: "the upload is not a JPEG, PNG, WebP or HEIF image"
    )
    static func tooManyPixels(_ limits: PhotoLimits) -> PhotoRejection {
        PhotoRejection(
            reason: Reason.tooManyPixels,
            message: "the image exceeds \(limits.maxPixels) pixels or \(limits.maxSide) pixels a side"
        )
    }
    static func tooManyProgressivePixels(_ limits: PhotoLimits) -> PhotoRejection {
        PhotoRejection(
            reason: Reason.tooManyPixels,
            message: "a progressive JPEG or interlaced PNG may have at most \(limits.maxProgressivePixels) pixels"
        )
    }
    static let truncated = PhotoRejection(reason: Reason.truncated, message: "the image file is truncated")
    static let trailingData = PhotoRejection(
        reason: Reason.trailingData,
        message: "the image file has data after its end"
    )
    static let corruptImage = PhotoRejection(reason: Reason.corruptImage, message: "the image could not be decoded")
    static func processingFailed(_ detail: String) -> PhotoRejection {
        PhotoRejection(reason: Reason.processingFailed, message: "the image could not be processed", detail: detail)
    }
    static func corruptImage(_ error: VipsError) -> PhotoRejection {
        PhotoRejection(reason: Reason.corruptImage, message: corruptImage.message, detail: error.description)
    }
}
