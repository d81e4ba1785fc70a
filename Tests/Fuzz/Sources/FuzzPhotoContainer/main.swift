// The photo container walker (KindredVips PhotoContainer): magic bytes, then the walk over JPEG segments, PNG
// chunks, the RIFF (WebP) size or the ISO BMFF boxes (HEIF) to the end of the image. The first byte can prepend a
// format's magic so every walker gets input. Beyond not crashing: a rejection is one of the documented ones
// (TRUNCATED, CORRUPT_IMAGE, TRAILING_DATA); an accepted file stays accepted with padding (0x00/0xFF) appended and
// is refused with any other byte appended; the format comes from the magic bytes alone; cutting an accepted JPEG
// or PNG before its end marker is refused.
import FuzzSupport
@testable import KindredVips

let magics: [[UInt8]] = [
    [],
    [0xFF, 0xD8, 0xFF],
    [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A],
    Array("RIFF".utf8),  // the size and "WEBP" come from the input
    [0x00, 0x00, 0x00, 0x18] + Array("ftypheic".utf8),
]
let documented: Set<String> = [
    PhotoRejection.truncated.reason, PhotoRejection.corruptImage.reason, PhotoRejection.trailingData.reason,
]

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzPhotoContainer(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let choice = Int(input.byte())
    var bytes = magics[choice % magics.count] + input.rest()
    if choice % magics.count == 3, bytes.count >= 8 { bytes.insert(contentsOf: Array("WEBP".utf8), at: 8) }
    guard let format = PhotoContainer.sniff(bytes) else { return 0 }
    require(PhotoContainer.sniff(bytes.prefix(16)) == format, "the format depends on more than the first bytes")
    guard let rejection = PhotoContainer.check(bytes, as: format) else {
        require(PhotoContainer.check(bytes + [0x00, 0xFF], as: format) == nil, "padding after an accepted file refused")
        // (HEIF's last box may have size 0, "to the end of the file", which then takes the byte in.)
        let appended = PhotoContainer.check(bytes + [0x41], as: format)
        require(appended == .trailingData || (format == .heif && appended == nil), "a byte after the image accepted")
        if format == .jpeg || format == .png, let last = bytes.lastIndex(where: { $0 != 0x00 && $0 != 0xFF }) {
            // Everything up to the last non-padding byte is part of the image, which ends with its end marker.
            require(PhotoContainer.check(Array(bytes[..<last]), as: format) != nil, "a cut file accepted")
        }
        _ = PhotoContainer.isProgressive(bytes, as: format)
        return 0
    }
    require(documented.contains(rejection.reason), "undocumented rejection \(rejection.reason)")
    return 0
}

runFuzzer(fuzzPhotoContainer)
