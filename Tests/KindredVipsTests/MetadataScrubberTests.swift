import Testing

@testable import KindredVips

/// The rewrite of the encoders' output, on hand-made files.
@Suite struct MetadataScrubberTests {
    static func chunk(_ fourcc: String, _ data: [UInt8]) -> [UInt8] {
        let size = data.count
        return Array(fourcc.utf8) + [UInt8(size & 0xFF), UInt8(size >> 8 & 0xFF), 0, 0] + data + (size & 1 == 1 ? [0] : [])
    }

    static func riff(_ chunks: [UInt8]) -> [UInt8] {
        let size = chunks.count + 4
        return Array("RIFF".utf8) + [UInt8(size & 0xFF), UInt8(size >> 8 & 0xFF), 0, 0] + Array("WEBP".utf8) + chunks
    }

    @Test func webpKeepsOnlyTheImageChunk() throws {
        let image = Self.chunk("VP8 ", [1, 2, 3])  // odd size: padded
        let input = Self.riff(
            Self.chunk("VP8X", Array(repeating: 0, count: 10)) + Self.chunk("ICCP", [9, 9]) + image
                + Self.chunk("EXIF", Array("Exif\u{0}\u{0}GPS".utf8)) + Self.chunk("XMP ", Array("<x:xmpmeta/>".utf8)))
        let output = try MetadataScrubber.webp(input)
        #expect(output == Self.riff(image))
        #expect(PhotoContainer.check(output, as: .webp) == nil)
    }

    @Test(arguments: [
        riff(chunk("VP8X", Array(repeating: 0, count: 10)) + chunk("ALPH", [1]) + chunk("VP8 ", [1])),  // alpha
        riff(chunk("VP8X", Array(repeating: 0, count: 10)) + chunk("ANIM", [1])),  // animation
        riff(chunk("VP8X", Array(repeating: 0, count: 10))),  // no image
        Array("RIFF\u{0}\u{0}\u{0}\u{0}AVI ".utf8),
    ])
    func webpOutputItDoesNotKnowIsAnError(input: [UInt8]) {
        #expect(throws: MetadataScrubber.Malformed.self) { try MetadataScrubber.webp(input) }
    }

    static func segment(_ marker: UInt8, _ data: [UInt8]) -> [UInt8] {
        let length = data.count + 2
        return [0xFF, marker, UInt8(length >> 8), UInt8(length & 0xFF)] + data
    }

    @Test func jpegLosesApplicationSegmentsAndComments() throws {
        let app0 = Self.segment(0xE0, Array("JFIF\u{0}".utf8))
        let dqt = Self.segment(0xDB, [0, 1, 2])
        let scan = Self.segment(0xDA, [1, 2]) + [0x12, 0xFF, 0x00, 0xFF, 0xE1, 0x34, 0xFF, 0xD9]  // data kept as is
        let input =
            [0xFF, 0xD8] + app0 + Self.segment(0xE1, Array("Exif\u{0}\u{0}".utf8)) + Self.segment(0xE2, Array("ICC_PROFILE".utf8))
            + Self.segment(0xED, Array("Photoshop 3.0".utf8)) + Self.segment(0xFE, Array("comment".utf8)) + dqt + scan
        #expect(try MetadataScrubber.jpeg(input) == [0xFF, 0xD8] + app0 + dqt + scan)
    }

    @Test(arguments: [
        [0x89, 0x50, 0x4E, 0x47] as [UInt8],  // not a JPEG
        [0xFF, 0xD8] + segment(0xDB, [0, 1]),  // no SOS
        [0xFF, 0xD8, 0xFF, 0xDB, 0x00, 0x40, 0x00],  // segment overruns
    ])
    func jpegOutputItDoesNotKnowIsAnError(input: [UInt8]) {
        #expect(throws: MetadataScrubber.Malformed.self) { try MetadataScrubber.jpeg(input) }
    }
}
