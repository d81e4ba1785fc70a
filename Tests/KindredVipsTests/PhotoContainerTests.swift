import Testing

@testable import KindredVips

/// Magic bytes and the container walk, on hand-made byte strings.
@Suite struct PhotoContainerTests {
    static let jpegSOI: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0]

    @Test(arguments: [
        (jpegSOI, PhotoSourceFormat?.some(.jpeg)),
        ([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13], .png),
        (Array("RIFF\u{0}\u{0}\u{0}\u{0}WEBPVP8 ".utf8), .webp),
        ([0, 0, 0, 24] + Array("ftypheic".utf8) + [0, 0, 0, 0], .heif),
        ([0, 0, 0, 24] + Array("ftypmif1".utf8) + [0, 0, 0, 0], .heif),
        ([0, 0, 0, 24] + Array("ftypavif".utf8) + [0, 0, 0, 0], nil),  // AVIF is not on the list
        ([0, 0, 0, 24] + Array("ftypisom".utf8) + [0, 0, 0, 0], nil),  // MP4
        (Array("II*\u{0}".utf8), nil),  // TIFF
        (Array("GIF89a".utf8), nil),
        (Array("<svg xmlns=".utf8), nil),
        (Array("%PDF-1.7".utf8), nil),
        (Array("RIFF\u{0}\u{0}\u{0}\u{0}AVI ".utf8), nil),
        ([0xFF, 0xD8], nil),  // too short to be sure
        ([], nil),
    ] as [([UInt8], PhotoSourceFormat?)])
    func sniff(prefix: [UInt8], expected: PhotoSourceFormat?) {
        #expect(PhotoPipeline.sniff(prefix) == expected)
    }

    /// SOI, an APP0 segment, SOS with entropy data containing stuffing and a restart marker, EOI.
    static let minimalJPEG: [UInt8] =
        [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x4A, 0x46, 0xFF, 0xDA, 0x00, 0x02]
        + [0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD0, 0x56] + [0xFF, 0xD9]

    @Test(arguments: [
        (minimalJPEG, nil),
        (minimalJPEG + [0, 0, 0xFF], nil),  // padding is allowed
        (minimalJPEG + Array("PK\u{3}\u{4}".utf8), PhotoRejection.trailingData),
        (Array(minimalJPEG.dropLast(2)), .truncated),  // no EOI
        (Array(minimalJPEG.prefix(5)), .truncated),  // segment length cut
        ([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x40, 0x00], .truncated),  // segment longer than the file
        ([0xFF, 0xD8, 0x12, 0x34], .corruptImage),  // no marker where one must be
    ] as [([UInt8], PhotoRejection?)])
    func jpeg(bytes: [UInt8], expected: PhotoRejection?) {
        #expect(PhotoContainer.check(bytes, as: .jpeg) == expected)
    }

    @Test(arguments: [
        ([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x02, 0xFF, 0xC2, 0x00, 0x02, 0xFF, 0xDA, 0x00, 0x02], true),
        ([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x02, 0xFF, 0xC0, 0x00, 0x02, 0xFF, 0xDA, 0x00, 0x02], false),
        // A large APPn segment before the frame header does not hide it.
        ([0xFF, 0xD8, 0xFF, 0xE1, 0xFF, 0xFF] + Array(repeating: 0, count: 0xFFFD) + [0xFF, 0xC2, 0x00, 0x02], true),
        ([0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x02], false),
    ] as [([UInt8], Bool)])
    func progressiveJPEG(bytes: [UInt8], expected: Bool) {
        #expect(PhotoContainer.isProgressive(bytes, as: .jpeg) == expected)
    }

    static func pngChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let length = UInt32(data.count)
        return [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
            + Array(type.utf8) + data + [0, 0, 0, 0]
    }
    static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    static let minimalPNG = pngSignature + pngChunk("IHDR", Array(repeating: 1, count: 13)) + pngChunk("IEND", [])

    @Test(arguments: [
        (minimalPNG, nil),
        (minimalPNG + Array("<?php".utf8), PhotoRejection.trailingData),
        (Array(minimalPNG.dropLast(3)), .truncated),
        (pngSignature + pngChunk("IDAT", []) + pngChunk("IEND", []), .corruptImage),  // IHDR must come first
    ] as [([UInt8], PhotoRejection?)])
    func png(bytes: [UInt8], expected: PhotoRejection?) {
        #expect(PhotoContainer.check(bytes, as: .png) == expected)
    }

    static func riff(size: Int, body: [UInt8]) -> [UInt8] {
        Array("RIFF".utf8) + [UInt8(size & 0xFF), UInt8(size >> 8 & 0xFF), 0, 0] + Array("WEBP".utf8) + body
    }

    @Test(arguments: [
        (riff(size: 8, body: [1, 2, 3, 4]), nil),
        (riff(size: 8, body: [1, 2, 3, 4, 0x50, 0x4B]), PhotoRejection.trailingData),
        (riff(size: 100, body: [1, 2, 3, 4]), .truncated),
    ] as [([UInt8], PhotoRejection?)])
    func webp(bytes: [UInt8], expected: PhotoRejection?) {
        #expect(PhotoContainer.check(bytes, as: .webp) == expected)
    }

    static func box(_ type: String, _ body: [UInt8]) -> [UInt8] {
        let size = body.count + 8
        return [0, 0, UInt8(size >> 8), UInt8(size & 0xFF)] + Array(type.utf8) + body
    }

    @Test(arguments: [
        (box("ftyp", Array("heic".utf8)) + box("meta", [0, 0, 0, 0]) + box("mdat", [1, 2, 3]), nil),
        (box("ftyp", Array("heic".utf8)) + box("meta", [0, 0, 0, 0]) + [0x50, 0x4B, 3, 4, 0x14, 0, 0, 0], .trailingData),
        (box("ftyp", Array("heic".utf8)) + box("meta", [0, 0, 0, 0]) + [0, 0, 1, 0] + Array("mdat".utf8) + [1], .truncated),
        (box("ftyp", Array("heic".utf8)) + box("mdat", [1]), .corruptImage),  // no meta box
        (Array((box("ftyp", Array("heic".utf8)) + box("meta", [0, 0, 0, 0])).dropLast()), .truncated),
    ] as [([UInt8], PhotoRejection?)])
    func heif(bytes: [UInt8], expected: PhotoRejection?) {
        #expect(PhotoContainer.check(bytes, as: .heif) == expected)
    }
}
