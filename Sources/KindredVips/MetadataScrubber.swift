/// The last step of every rendition: rewrites the encoder's output so it can hold nothing but pixels, whatever
/// libvips wrote.
///
/// Needed, not just careful: libvips 8.14.1 (Debian 12) `webpsave` ignores `strip` and always writes an EXIF
/// chunk (regenerated from the image's header: orientation, resolution) in a VP8X container. The JPEG side is a
/// check on `jpegsave`'s `strip`: any APP1...APP15 or COM segment is dropped. Both run on our own encoder's output,
/// so anything unexpected is a bug and fails loudly instead of being served.
enum MetadataScrubber {
    /// A failure to parse our own encoder's output.
    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    /// The WebP as a "simple lossy" file: RIFF header and the single `VP8 ` chunk (no VP8X, EXIF, XMP or ICCP).
    /// Renditions are opaque (flattened), so there is no ALPH chunk to keep.
    static func webp(_ bytes: [UInt8]) throws(Malformed) -> [UInt8] {
        guard bytes.count >= 12, bytes[0..<4].elementsEqual(Array("RIFF".utf8)),
            bytes[8..<12].elementsEqual(Array("WEBP".utf8))
        else { throw Malformed(description: "webpsave output is not RIFF WEBP") }
        var index = 12
        var image: ArraySlice<UInt8>?
        while index + 8 <= bytes.count {
            let fourcc = String(decoding: bytes[index..<(index + 4)], as: UTF8.self)
            let size = Int(bytes[index + 4]) | Int(bytes[index + 5]) << 8 | Int(bytes[index + 6]) << 16
                | Int(bytes[index + 7]) << 24
            let end = index + 8 + size
            guard end <= bytes.count else { throw Malformed(description: "webpsave chunk \(fourcc) overruns") }
            switch fourcc {
            case "VP8 ":
                image = bytes[index..<end]
            case "VP8X", "EXIF", "XMP ", "ICCP":
                break
            default:
                throw Malformed(description: "webpsave wrote an unexpected chunk \(fourcc)")
            }
            index = end + (size & 1)
        }
        guard let image else { throw Malformed(description: "webpsave output has no VP8 chunk") }
        let padding = image.count & 1
        let riffSize = 4 + image.count + padding
        var out: [UInt8] = Array("RIFF".utf8)
        out.reserveCapacity(8 + riffSize)
        out += [UInt8(riffSize & 0xFF), UInt8(riffSize >> 8 & 0xFF), UInt8(riffSize >> 16 & 0xFF), UInt8(riffSize >> 24)]
        out += Array("WEBP".utf8)
        out += image
        if padding == 1 { out.append(0) }
        return out
    }

    /// The JPEG without APP1...APP15 (EXIF, XMP, ICC, IPTC, ...) and COM segments; APP0 (JFIF) and the coding
    /// segments are kept, and everything from the first SOS on is copied unchanged.
    static func jpeg(_ bytes: [UInt8]) throws(Malformed) -> [UInt8] {
        guard bytes.count >= 4, bytes[0] == 0xFF, bytes[1] == 0xD8 else {
            throw Malformed(description: "jpegsave output does not start with SOI")
        }
        var out: [UInt8] = [0xFF, 0xD8]
        out.reserveCapacity(bytes.count)
        var index = 2
        while index + 4 <= bytes.count {
            guard bytes[index] == 0xFF else { throw Malformed(description: "jpegsave output has no marker") }
            let marker = bytes[index + 1]
            if marker == 0xDA {
                out += bytes[index...]
                return out
            }
            let length = Int(bytes[index + 2]) << 8 | Int(bytes[index + 3])
            let end = index + 2 + length
            guard length >= 2, end <= bytes.count else { throw Malformed(description: "jpegsave segment overruns") }
            if !((0xE1...0xEF).contains(marker) || marker == 0xFE) {
                out += bytes[index..<end]
            }
            index = end
        }
        throw Malformed(description: "jpegsave output has no SOS")
    }
}
