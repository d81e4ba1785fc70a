#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// The container checks made before libvips sees an upload: the format from its magic bytes, and a walk over the
/// file's structure to its end marker so that truncated files and polyglots (a ZIP, PDF or script appended after
/// the image) are refused with a precise reason. Pure Swift over the bytes, no decoding.
///
/// The trailing-data rule: after the end of the image (JPEG EOI, PNG IEND, the RIFF size, the last ISO BMFF box)
/// only padding may follow — bytes 0x00 or 0xFF, which some encoders and cameras write. Anything else is refused as
/// `TRAILING_DATA`. This also refuses phone files that append data after EOI (Samsung's SEF trailer, Google's
/// Motion Photo video, MPO's second image); apps send the picker's re-encoded JPEG, which has none. The renditions are
/// re-encoded from pixels, so nothing after the image could reach a served byte anyway: the rule keeps the store
/// and any copy of an upload free of a second file that other tools would open.
enum PhotoContainer {
    /// The format named by the first bytes, or nil when it is not on the allowlist.
    static func sniff(_ prefix: some Collection<UInt8>) -> PhotoSourceFormat? {
        let head = Array(prefix.prefix(16))
        if head.starts(with: [0xFF, 0xD8, 0xFF]) {
            return .jpeg
        }
        if head.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) {
            return .png
        }
        if head.count >= 12, head[0..<4].elementsEqual(Array("RIFF".utf8)), head[8..<12].elementsEqual(Array("WEBP".utf8)) {
            return .webp
        }
        if head.count >= 12, head[4..<8].elementsEqual(Array("ftyp".utf8)),
            heifBrands.contains(String(decoding: head[8..<12], as: UTF8.self))
        {
            return .heif
        }
        return nil
    }

    /// Major brands of HEIF files with HEVC images (AVIF's `avif`/`avis` are not on the list).
    static let heifBrands: Set<String> = ["heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1"]

    /// Walks the container of `bytes` (already sniffed as `format`) to its end; nil when it is whole and ends
    /// with at most padding.
    static func check(_ bytes: [UInt8], as format: PhotoSourceFormat) -> PhotoRejection? {
        let end: Result<Int, PhotoRejection>
        switch format {
        case .jpeg: end = jpegEnd(bytes)
        case .png: end = pngEnd(bytes)
        case .webp: end = webpEnd(bytes)
        case .heif: end = isoBoxesEnd(bytes)
        }
        switch end {
        case .failure(let rejection):
            return rejection
        case .success(let end):
            return bytes[end...].allSatisfy { $0 == 0x00 || $0 == 0xFF } ? nil : .trailingData
        }
    }

    /// The offset just past JPEG's EOI marker: segments are skipped by their lengths, entropy-coded data is
    /// scanned for the next marker (0xFF followed by anything but 0x00 stuffing or a restart marker).
    static func jpegEnd(_ bytes: [UInt8]) -> Result<Int, PhotoRejection> {
        var index = 2  // after SOI
        while true {
            // Markers may be preceded by any number of 0xFF fill bytes.
            guard index < bytes.count, bytes[index] == 0xFF else {
                return index >= bytes.count ? .failure(.truncated) : .failure(.corruptImage)
            }
            while index < bytes.count, bytes[index] == 0xFF { index += 1 }
            guard index < bytes.count else { return .failure(.truncated) }
            let marker = bytes[index]
            index += 1
            switch marker {
            case 0xD9:  // EOI
                return .success(index)
            case 0x01, 0xD0...0xD7:  // TEM and RSTn stand alone
                continue
            case 0x00, 0xD8:  // stuffing outside entropy data, or a second SOI
                return .failure(.corruptImage)
            default:
                guard index + 2 <= bytes.count else { return .failure(.truncated) }
                let length = Int(bytes[index]) << 8 | Int(bytes[index + 1])
                guard length >= 2 else { return .failure(.corruptImage) }
                guard index + length <= bytes.count else { return .failure(.truncated) }
                index += length
                if marker == 0xDA {  // SOS: entropy-coded data runs to the next real marker
                    guard let next = nextMarker(in: bytes, from: index) else { return .failure(.truncated) }
                    index = next
                }
            }
        }
    }

    /// Whether the decoder must hold the whole image: a progressive JPEG or an interlaced (Adam7) PNG. Call after
    /// `check` accepted the file.
    static func isProgressive(_ bytes: [UInt8], as format: PhotoSourceFormat) -> Bool {
        switch format {
        case .jpeg: isProgressiveJPEG(bytes)
        case .png: bytes.count > 28 && bytes[28] == 1  // IHDR's interlace method (IHDR is first: checked)
        case .webp, .heif: false
        }
    }

    /// Whether the JPEG's frame header (the first SOFn before the first scan) is progressive: SOF2, SOF6, SOF10 or
    /// SOF14.
    static func isProgressiveJPEG(_ bytes: [UInt8]) -> Bool {
        var index = 2
        while index + 4 <= bytes.count, bytes[index] == 0xFF {
            let marker = bytes[index + 1]
            switch marker {
            case 0xFF:
                index += 1  // fill byte
                continue
            case 0xC2, 0xC6, 0xCA, 0xCE:
                return true
            case 0xC0, 0xC1, 0xC3, 0xC5, 0xC7, 0xC9, 0xCB, 0xCD, 0xCF, 0xDA:
                return false  // another frame type, or the first scan
            default:
                index += 2 + (Int(bytes[index + 2]) << 8 | Int(bytes[index + 3]))
            }
        }
        return false
    }

    /// The offset of the first 0xFF in entropy-coded data that starts a marker (not 0xFF00 stuffing, not a
    /// restart marker RSTn), or nil when the data ends first. memchr keeps this fast in debug builds too: the scan
    /// covers nearly the whole file.
    private static func nextMarker(in bytes: [UInt8], from start: Int) -> Int? {
        bytes.withUnsafeBufferPointer { buffer -> Int? in
            guard let base = buffer.baseAddress else { return nil }
            var index = start
            while index + 1 < buffer.count {
                guard let found = memchr(base + index, 0xFF, buffer.count - index - 1) else { return nil }
                index = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
                let following = buffer[index + 1]
                if following != 0x00, !(0xD0...0xD7).contains(following) { return index }
                index += 2
            }
            return nil
        }
    }

    /// The offset just past PNG's IEND chunk; the first chunk must be IHDR.
    static func pngEnd(_ bytes: [UInt8]) -> Result<Int, PhotoRejection> {
        var index = 8  // after the signature
        var first = true
        while true {
            guard index + 8 <= bytes.count else { return .failure(.truncated) }
            let length = readUInt32(bytes, at: index)
            let type = bytes[(index + 4)..<(index + 8)]
            guard length <= 0x7FFF_FFFF else { return .failure(.corruptImage) }
            if first, !type.elementsEqual(Array("IHDR".utf8)) { return .failure(.corruptImage) }
            first = false
            let next = index + 12 + length  // length, type, data, CRC
            guard next <= bytes.count else { return .failure(.truncated) }
            index = next
            if type.elementsEqual(Array("IEND".utf8)) { return .success(index) }
        }
    }

    /// The offset just past the RIFF chunk (its declared size plus the 8-byte header, padded to even).
    static func webpEnd(_ bytes: [UInt8]) -> Result<Int, PhotoRejection> {
        guard bytes.count >= 12 else { return .failure(.truncated) }
        let size = Int(bytes[4]) | Int(bytes[5]) << 8 | Int(bytes[6]) << 16 | Int(bytes[7]) << 24
        guard size >= 4 else { return .failure(.corruptImage) }
        let end = 8 + size + (size & 1)
        guard end <= bytes.count else { return .failure(.truncated) }
        return .success(end)
    }

    /// The offset just past the last top-level ISO BMFF box (HEIF): every box must fit in the file; a box of
    /// size 0 runs to the end. Bytes that do not form a box end the walk and are judged as trailing data.
    static func isoBoxesEnd(_ bytes: [UInt8]) -> Result<Int, PhotoRejection> {
        var index = 0
        var sawMeta = false
        while index + 8 <= bytes.count {
            var size = readUInt32(bytes, at: index)
            let type = bytes[(index + 4)..<(index + 8)]
            guard type.allSatisfy({ (0x20...0x7E).contains($0) }) else { break }  // not a box header
            if size == 1 {
                guard index + 16 <= bytes.count else { return .failure(.truncated) }
                let high = readUInt32(bytes, at: index + 8)
                guard high == 0 else { return .failure(.truncated) }  // ≥ 4 GiB: larger than any upload
                size = readUInt32(bytes, at: index + 12)
                guard size >= 16 else { return .failure(.corruptImage) }
            } else if size == 0 {
                size = bytes.count - index
            } else if size < 8 {
                return .failure(.corruptImage)
            }
            guard index + size <= bytes.count else { return .failure(.truncated) }
            if type.elementsEqual(Array("meta".utf8)) { sawMeta = true }
            index += size
        }
        guard sawMeta else { return .failure(.corruptImage) }
        return .success(index)
    }

    private static func readUInt32(_ bytes: [UInt8], at index: Int) -> Int {
        Int(bytes[index]) << 24 | Int(bytes[index + 1]) << 16 | Int(bytes[index + 2]) << 8 | Int(bytes[index + 3])
    }
}
