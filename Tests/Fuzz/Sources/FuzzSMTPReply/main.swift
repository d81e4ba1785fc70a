// SMTP reply parsing (KindredSMTP SMTPReplyParser): a relay's bytes, split into chunks as the input says. Beyond
// not crashing: the replies equal those of one parse of the whole stream (chunking changes nothing); every reply
// has an RFC 5321 code (2xx-5xx, second digit 0-5) and between 1 and 256 lines, none longer than 4096 bytes; a
// failure is a protocol error, never another kind; the parser never buffers more than a line's limit without a
// newline; the sanitized text holds no control character and at most 512 scalars.
import FuzzSupport
@testable import KindredSMTP
import NIOCore

func parse(_ stream: [UInt8], chunks plan: [UInt8]) -> (replies: [SMTPReply], failed: Bool) {
    var parser = SMTPReplyParser()
    var replies: [SMTPReply] = []
    for piece in chunks(of: stream, plan: plan) {
        parser.append(ByteBuffer(bytes: piece))
        do {
            while let reply = try parser.next() { replies.append(reply) }
        } catch {
            require(error.code == .protocolError, "a reply refused as \(error.code)")
            return (replies, true)
        }
    }
    return (replies, false)
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzSMTPReply(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let plan = input.take(Int(input.byte() % 8))
    let stream = input.rest()
    let whole = parse(stream, chunks: [])
    let chunked = parse(stream, chunks: plan)
    // A line too long is seen sooner or later depending on the chunks; everything else is the same.
    require(whole.replies.starts(with: chunked.replies) || chunked.replies.starts(with: whole.replies), "chunks changed the replies")
    if !whole.failed, !chunked.failed { require(whole.replies == chunked.replies, "chunks changed the replies") }
    for reply in whole.replies {
        require((200...559).contains(reply.code) && (reply.code / 10) % 10 <= 5, "reply code \(reply.code)")
        require((1...256).contains(reply.lines.count), "\(reply.lines.count) lines")
        require(reply.lines.allSatisfy { $0.utf8.count <= 4096 }, "a line over 4096 bytes")
        let text = reply.sanitizedText
        require(text.unicodeScalars.count <= 512, "sanitized text of \(text.unicodeScalars.count) scalars")
        require(text.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F }, "control in sanitized text")
        _ = reply.enhancedStatusCode
    }
    return 0
}

runFuzzer(fuzzSMTPReply)
