// The text validator (KindredServiceKit TextRule, every field's rule) and geohash decoding (Geohash). The first
// byte picks the case. Text, beyond not crashing: an accepted value holds its rule's limits in characters and in
// UTF-8 bytes, carries no control character (a newline only in multi-line text) and no bidi override, and is
// accepted again unchanged (what is stored validates when it is read back); bytes that are not UTF-8 are refused
// as INVALID_UTF8; `truncating` always fits the limits. Geohash: a cell that decodes consists of 1...12 base32
// characters, its centre lies within its bounds and encodes back to the same cell; a point encodes to a cell whose
// bounds contain it.
import FuzzSupport
import KindredGeo
import KindredServiceKit

let rules: [TextRule] = [
    .displayName, .bio, .jobOrCity, .interest, .communityName, .label, .username, .attributeText(maxLength: 40),
    TextRule(.token, characters: 1...64, maxBytes: 64),
]

func checkText(_ rule: TextRule, _ bytes: [UInt8]) {
    let result: String
    do {
        result = try rule.validate(utf8: bytes, field: "field")
    } catch {
        if String(validating: bytes, as: UTF8.self) == nil {
            require(error.reason == .invalidUTF8, "bytes that are not UTF-8 refused as \(error.reason)")
        }
        return
    }
    let characters = result.count
    require(
        (result.isEmpty && rule.characters.lowerBound == 0) || rule.characters.contains(characters),
        "accepted \(characters) characters for \(rule.characters)"
    )
    require(result.utf8.count <= rule.maxBytes, "accepted \(result.utf8.count) bytes over \(rule.maxBytes)")
    for scalar in result.unicodeScalars {
        if scalar == "\n", rule.kind == .text { continue }
        require(scalar.properties.generalCategory != .control, "accepted control U+\(String(scalar.value, radix: 16))")
        require(!(0x202A...0x202E).contains(scalar.value), "accepted bidi override U+\(String(scalar.value, radix: 16))")
    }
    require((try? rule.validate(result, field: "field")) == result, "accepted text does not validate again unchanged")
    let truncated = rule.truncating(String(decoding: bytes, as: UTF8.self))
    require(truncated.count <= rule.characters.upperBound, "truncating kept \(truncated.count) characters")
    require(truncated.utf8.count <= rule.maxBytes, "truncating kept \(truncated.utf8.count) bytes")
}

func checkCell(_ text: String) {
    guard let bounds = Geohash.bounds(text), let centre = Geohash.decode(text) else {
        require(Geohash.decode(text) == nil, "decode without bounds")
        return
    }
    require((1...12).contains(text.unicodeScalars.count), "a cell of \(text.unicodeScalars.count) scalars decoded")
    require(bounds.latitude.contains(centre.latitude) && bounds.longitude.contains(centre.longitude), "centre outside")
    require(
        Geohash.encode(latitude: centre.latitude, longitude: centre.longitude, precision: text.count) == text,
        "the centre of \(text) encodes to another cell"
    )
}

func checkPoint(_ latitude: Double, _ longitude: Double, _ precision: Int) {
    guard let cell = Geohash.encode(latitude: latitude, longitude: longitude, precision: precision) else {
        require(!Geohash.isValid(latitude: latitude, longitude: longitude) || !(1...12).contains(precision), "valid refused")
        return
    }
    guard let bounds = Geohash.bounds(cell) else { return require(false, "encoded cell \(cell) does not decode") }
    require(cell.count == precision, "cell of \(cell.count) for precision \(precision)")
    require(bounds.latitude.contains(latitude) && bounds.longitude.contains(longitude), "\(cell) does not contain its point")
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzTextGeohash(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let choice = Int(input.byte())
    switch choice % 3 {
    case 0:
        checkText(rules[(choice / 3) % rules.count], input.rest())
    case 1:
        checkCell(String(decoding: input.rest(), as: UTF8.self))
    default:
        let bits = input.take(16) + Array(repeating: 0, count: 16)
        let latitude = Double(bitPattern: bits[0..<8].enumerated().reduce(UInt64(0)) { $0 | UInt64($1.1) << (8 * $1.0) })
        let longitude = Double(bitPattern: bits[8..<16].enumerated().reduce(UInt64(0)) { $0 | UInt64($1.1) << (8 * $1.0) })
        // Mostly points on Earth, some raw bit patterns (NaN, infinities, out of range).
        if choice & 0x80 == 0 {
            checkPoint(latitude.truncatingRemainder(dividingBy: 90), longitude.truncatingRemainder(dividingBy: 180), 1 + choice % 12)
        } else {
            checkPoint(latitude, longitude, choice % 14)
        }
    }
    return 0
}

runFuzzer(fuzzTextGeohash)
