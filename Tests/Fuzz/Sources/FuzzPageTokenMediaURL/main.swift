// Page tokens (KindredServiceKit PageToken) and signed media URLs (MediaURLSigner). The first byte picks the case.
// Beyond not crashing: bytes the fuzzer makes up never decode or verify (no forgery); a real token or URL, with
// bytes changed, inserted or cut as the input says, is either refused or stands for exactly what was signed (the
// same offset; the same path and expiry) — never another page, photo or time; a token is refused for another
// scope and after its expiry; a media path that parses prints back to a path that parses equal.
import Foundation
import FuzzSupport
import KindredMediaURL
import KindredOpenSSL
import KindredServiceKit

let key = Array(repeating: UInt8(7), count: 32)
let scope = "0190f1de-5c6e-7a1b-9c2d-3e4f5a6b7c8d|distance=50"
let now = Date(timeIntervalSince1970: 1_800_000_000)
let signer = MediaURLSigner(key: key)!
let nowSeconds: Int64 = 1_800_000_000

/// `text` with the edits the input describes: each edit is a position, an operation and a byte.
func mutate(_ text: String, _ input: inout FuzzInput) -> String {
    var bytes = Array(text.utf8)
    for _ in 0..<(1 + Int(input.byte()) % 4) {
        let position = bytes.isEmpty ? 0 : Int(input.byte()) % bytes.count
        let value = input.byte()
        switch input.byte() % 4 {
        case 0 where !bytes.isEmpty: bytes[position] = value
        case 1: bytes.insert(value, at: position)
        case 2 where !bytes.isEmpty: bytes.remove(at: position)
        default: bytes = Array(bytes[..<position])
        }
    }
    return String(decoding: bytes, as: UTF8.self)
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzPageTokenMediaURL(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    switch input.byte() % 6 {
    case 0:  // a made-up page token
        let token = String(decoding: input.rest(), as: UTF8.self)
        require(PageToken.decode(token, key: key, scope: scope, now: now) == nil, "made-up page token accepted")
    case 1:  // a real page token, edited
        let offset = input.uint16() * Int(input.byte() | 1)
        let token = PageToken.encode(offset: offset, key: key, scope: scope, now: now)
        require(PageToken.decode(token, key: key, scope: scope, now: now) == offset, "own token refused")
        require(PageToken.decode(token, key: key, scope: scope + "x", now: now) == nil, "token accepted for another scope")
        require(
            PageToken.decode(token, key: key, scope: scope, now: now.addingTimeInterval(3600)) == nil,
            "token accepted at its expiry"
        )
        let edited = mutate(token, &input)
        let decoded = PageToken.decode(edited, key: key, scope: scope, now: now)
        require(decoded == nil || decoded == offset, "edited token \(edited) decoded to \(decoded!) not \(offset)")
    case 2:  // a made-up media request target
        let target = String(decoding: input.rest(), as: UTF8.self)
        require(signer.verify(target, now: nowSeconds) == nil, "made-up media URL accepted: \(target)")
    case 3, 4:  // a real media URL, edited
        var id = Array("0190f1de-5c6e-7a1b-9c2d-3e4f5a6b7c8d".utf8)
        id[Int(input.byte()) % id.count] = Array("0123456789abcdef".utf8)[Int(input.byte()) % 16]
        let path = MediaURLSigner.Path(
            photoID: String(decoding: id, as: UTF8.self),
            version: Int64(input.uint16()) + 1,
            variant: Int32(input.byte() % 4) + 1,
            format: input.byte() & 1 == 0 ? "jpeg" : "webp"
        )
        let expires = signer.expiry(now: nowSeconds)
        let url = signer.sign(path, expires: expires)
        require(MediaURLSigner.Path(path.text) == path, "path does not parse back: \(path.text)")
        require(signer.verify(url, now: nowSeconds)?.path == path, "own URL refused: \(url)")
        require(signer.verify(url, now: expires) == nil, "URL accepted at its expiry")
        let edited = mutate(url, &input)
        if let verified = signer.verify(edited, now: nowSeconds) {
            require(verified.path == path && verified.expires == expires, "edited URL \(edited) verified as another")
        }
    default:  // a media path alone
        let text = String(decoding: input.rest(), as: UTF8.self)
        if let path = MediaURLSigner.Path(text) {
            require(MediaURLSigner.Path(path.text) == path, "\(text) parsed, its text \(path.text) does not")
        }
    }
    return 0
}

runFuzzer(fuzzPageTokenMediaURL)
